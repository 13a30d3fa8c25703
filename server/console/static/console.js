// The console works without this file: every action is a plain form. It
// only keeps a second click from sending a form twice while it is on its way.
document.addEventListener("submit", function (e) {
  var f = e.target;
  if (f.dataset.sent) { e.preventDefault(); return; }
  f.dataset.sent = "1";
  var b = f.querySelector("button[type=submit]");
  if (b) { b.setAttribute("aria-busy", "true"); }
});
// A page restored from the back-forward cache keeps its forms usable.
window.addEventListener("pageshow", function (e) {
  if (!e.persisted) { return; }
  document.querySelectorAll("form[data-sent]").forEach(function (f) {
    delete f.dataset.sent;
    var b = f.querySelector("button[type=submit]");
    if (b) { b.removeAttribute("aria-busy"); }
  });
});
