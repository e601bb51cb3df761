// The preview countdown: the only script of the review UI. It counts down from the
// time the server said was left (no clock comparison with the server), and says when
// the preview has expired, disabling the Confirm button and showing Preview again
// beside it. The server stays the authority: confirming late is refused.
(function () {
  "use strict";
  var el = document.getElementById("countdown");
  if (!el || el.getAttribute("data-state") !== "running") {
    return;
  }
  var remaining = parseInt(el.getAttribute("data-remaining-ms"), 10);
  if (!(remaining >= 0)) {
    return;
  }
  var start = window.performance.now();
  function tick() {
    var left = remaining - (window.performance.now() - start);
    if (left <= 0) {
      el.textContent = "This preview has expired. Preview again to confirm.";
      el.setAttribute("data-state", "expired");
      el.setAttribute("aria-live", "polite");
      el.classList.add("expired");
      var confirm = document.getElementById("confirm");
      if (confirm) {
        confirm.disabled = true;
        confirm.setAttribute("title", "This preview has expired. Preview again to confirm.");
      }
      var again = document.getElementById("when-expired");
      if (again) {
        again.hidden = false;
      }
      return;
    }
    var seconds = Math.ceil(left / 1000);
    var minutes = Math.floor(seconds / 60);
    var rest = seconds % 60;
    el.textContent = minutes + ":" + (rest < 10 ? "0" : "") + rest + " left";
    window.setTimeout(tick, Math.min(250, left));
  }
  tick();
})();
