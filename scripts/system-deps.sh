#!/usr/bin/env bash
# Installs the Debian packages the tests drive for real: Apache httpd with mod_dav
# (tests/test_apache_dav.py starts it from a config the test writes; no system service)
# and Chromium (tests/test_web_browser.py drives /usr/bin/chromium with Playwright), and
# PostgreSQL (tests/postgres.py runs its initdb and pg_ctl in a temporary directory; the
# package's own cluster is never started: policy-rc.d below), Node.js with npm
# (tests/server_envs.py installs pouchdb-server and Azurite with npm ci; Node 20 or later),
# and the sqlite3 shell the README's "Inspect what the demo left" uses (tests/test_demo.py).
# Idempotent and quick when everything is already there. Needs root (CI runs as root).
set -euo pipefail

missing=()
if ! command -v apache2 >/dev/null 2>&1 && [ ! -x /usr/sbin/apache2 ]; then
    missing+=(apache2)
fi
for module in mod_dav.so mod_dav_fs.so; do
    if [ ! -f "/usr/lib/apache2/modules/$module" ]; then
        missing+=(apache2)
        break
    fi
done

if ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/bin/chromium ]; then
    missing+=(chromium)
fi

if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
    missing+=(postgresql)
fi

if ! command -v npm >/dev/null 2>&1; then
    missing+=(nodejs npm)
fi

if ! command -v sqlite3 >/dev/null 2>&1; then
    missing+=(sqlite3)
fi

if [ "${#missing[@]}" -eq 0 ]; then
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "system-deps: need root to install: ${missing[*]} (or install them yourself)" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# policy-rc.d stops the package from starting the system service while it installs.
policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 0755 "$policy"
    created_policy=1
fi
cleanup() { if [ "$created_policy" -eq 1 ]; then rm -f "$policy"; fi; }
trap cleanup EXIT
# Sorted and de-duplicated: apache2 may be listed twice (binary and modules).
mapfile -t packages < <(printf '%s\n' "${missing[@]}" | sort -u)
apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
command -v apache2 >/dev/null 2>&1 || [ -x /usr/sbin/apache2 ]
command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ]
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null
command -v npm >/dev/null 2>&1
