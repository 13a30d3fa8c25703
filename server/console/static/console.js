// The console works without this file: every action is a plain form. It
// only keeps a second click from sending a form twice while it is on its way.
document.addEventListener("submit", function (e) {
  var f = e.target;
  if (f.dataset.sent) { e.preventDefault(); return; }
  f.dataset.sent = "1";
  var b = f.querySelector("button[type=submit]");
  if (b) { b.setAttribute("aria-busy", "true"); }
});
