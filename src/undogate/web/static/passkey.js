// The passkey step (docs/proof.md): register a passkey on the passkeys page,
// and sign what a form asks a passkey to approve (the exact preview before its Confirm,
// an acceptance, adding or revoking a passkey) before it is sent. The options
// (challenge, relying party, credentials) come rendered into the page, one set per
// form; the browser's answer goes back in the same form, as JSON text. The server
// checks everything: this script only carries bytes between the form and the
// authenticator.
(function () {
  "use strict";

  function toBytes(text) {
    var b64 = text.replace(/-/g, "+").replace(/_/g, "/");
    while (b64.length % 4) {
      b64 += "=";
    }
    var raw = atob(b64);
    var bytes = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) {
      bytes[i] = raw.charCodeAt(i);
    }
    return bytes.buffer;
  }

  function toText(buffer) {
    var bytes = new Uint8Array(buffer);
    var raw = "";
    for (var i = 0; i < bytes.length; i++) {
      raw += String.fromCharCode(bytes[i]);
    }
    return btoa(raw).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function descriptors(list) {
    return (list || []).map(function (c) {
      return { type: c.type, id: toBytes(c.id), transports: c.transports };
    });
  }

  // data-state says where the step is ("asking", "refused"): a refusal is never
  // confused with the question before it.
  function say(text, state) {
    var el = document.getElementById("passkey-status");
    if (el) {
      el.textContent = text;
      el.setAttribute("data-state", state);
    }
  }

  // What to do after a refusal is the page's to say (data-retry): the passkeys page
  // has no preview to make again.
  function refused(err) {
    var el = document.getElementById("passkey-status");
    var retry = (el && el.getAttribute("data-retry")) || "Try again.";
    var name = err && err.name ? err.name : "error";
    var why = name === "SecurityError"
      ? "The browser refused to use a passkey at this address (SecurityError)"
      : "The passkey did not answer (" + name + ")";
    say(why + ": nothing was sent. " + retry, "refused");
  }

  var register = document.getElementById("passkey-register");
  if (register) {
    register.addEventListener("submit", function (event) {
      event.preventDefault();
      var o = JSON.parse(register.getAttribute("data-options"));
      var publicKey = {
        challenge: toBytes(o.challenge),
        rp: o.rp,
        user: { id: toBytes(o.user.id), name: o.user.name, displayName: o.user.displayName },
        pubKeyCredParams: o.pubKeyCredParams,
        timeout: o.timeout,
        attestation: o.attestation,
        authenticatorSelection: o.authenticatorSelection,
        excludeCredentials: descriptors(o.excludeCredentials)
      };
      navigator.credentials.create({ publicKey: publicKey }).then(function (cred) {
        register.elements.credential.value = JSON.stringify({
          id: cred.id,
          rawId: toText(cred.rawId),
          type: cred.type,
          response: {
            clientDataJSON: toText(cred.response.clientDataJSON),
            attestationObject: toText(cred.response.attestationObject),
            transports: cred.response.getTransports ? cred.response.getTransports() : []
          },
          clientExtensionResults: cred.getClientExtensionResults(),
          authenticatorAttachment: cred.authenticatorAttachment
        });
        register.submit();
      }, refused);
    });
  }

  function approving(field) {
    var form = field.form;
    if (!form) {
      return;
    }
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var o = JSON.parse(field.getAttribute("data-passkey-options"));
      var publicKey = {
        challenge: toBytes(o.challenge),
        rpId: o.rpId,
        timeout: o.timeout,
        allowCredentials: descriptors(o.allowCredentials),
        userVerification: o.userVerification
      };
      say("Approve exactly this with your passkey…", "asking");
      navigator.credentials.get({ publicKey: publicKey }).then(function (cred) {
        field.value = JSON.stringify({
          id: cred.id,
          rawId: toText(cred.rawId),
          type: cred.type,
          response: {
            authenticatorData: toText(cred.response.authenticatorData),
            clientDataJSON: toText(cred.response.clientDataJSON),
            signature: toText(cred.response.signature),
            userHandle: cred.response.userHandle ? toText(cred.response.userHandle) : null
          },
          clientExtensionResults: cred.getClientExtensionResults()
        });
        form.submit();
      }, refused);
    });
  }

  Array.prototype.forEach.call(document.querySelectorAll("input[data-passkey-options]"), approving);
})();
