// Drives the operator console in headless Chromium (Debian's, through
// playwright-core): sign in, find the action in review, ask the provider,
// settle it with confirmation, read its history. Run by TestBrowser
// (browser_test.go), which gives it the server and the action through the
// environment and checks the database afterwards. Exits non-zero on the
// first thing that is not as expected.
import { chromium } from "playwright-core";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const base = env("CONSOLE_URL");
const token = env("CONSOLE_TOKEN");
const key = env("CONSOLE_KEY");
const ref = env("CONSOLE_REF");
const shot = env("CONSOLE_SCREENSHOT");
const phoneShot = process.env.CONSOLE_PHONE_SCREENSHOT;

const problems = [];
const check = (ok, what) => {
  if (!ok) throw new Error("browser test: " + what);
  console.log("ok  " + what);
};

const ctx = await chromium.launchPersistentContext(env("CONSOLE_PROFILE"), {
  executablePath: env("CHROMIUM"),
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  viewport: { width: 1100, height: 900 },
});
try {
  const page = ctx.pages()[0] ?? (await ctx.newPage());
  page.on("console", (m) => { if (m.type() === "error") problems.push(m.text()); });
  page.on("pageerror", (e) => problems.push(String(e)));

  let res = await page.goto(base + "/console/");
  check(res.status() === 401, "without a session the console answers 401");
  check(await page.locator("h1", { hasText: "Operator sign-in" }).isVisible(), "and shows the sign-in page");

  await page.fill("#token", token);
  await Promise.all([page.waitForURL(base + "/console/"), page.click("button:has-text('Sign in')")]);
  check(await page.locator("h1", { hasText: "Review queue" }).isVisible(), "signed in: the review queue");
  problems.length = 0; // the 401 of the first page was expected

  const item = page.locator(`article[data-key="${key}"]`);
  check(await item.count() === 1, "the action in review is in the queue");
  const text = await item.innerText();
  check(text.includes(ref) && text.includes("pix.charge"), "with its tool and intent ref");
  check((await item.locator(".attempts").innerText()).trim() === "2", "with its attempts");
  check(text.includes("uncertain") && text.includes("HTTP 503"), "with its last error and class (the lookup that could not answer)");
  const first = await item.locator(".lookup").innerText();
  check(first.includes("not_found") && first.includes("by alice"), "showing the queue asked the provider: it has no record of the key");

  // The form posts, is redirected back to the queue, and a new document
  // commits: wait for that one, not the queue already on screen.
  const [lookup] = await Promise.all([
    page.waitForResponse((r) => r.url() === base + "/console/lookup" && r.request().method() === "POST"),
    page.waitForEvent("framenavigated", (f) => f === page.mainFrame()),
    item.locator("button.lookup-btn").click(),
  ]);
  check(lookup.status() === 303, "the button asked the provider again");
  await page.waitForLoadState("load");
  const look = await page.locator(`article[data-key="${key}"] .lookup`).innerText();
  check(look.includes("not_found") && look.includes("by alice"), "and the queue shows its answer: still no record of the key");

  const it = page.locator(`article[data-key="${key}"]`);
  await it.locator("summary", { hasText: "Settle" }).click();
  await it.locator("input[name=status][value=failed]").check();
  await it.locator("input[name=reason]").fill("PSP dashboard: no charge under this key");
  await page.screenshot({ path: shot, fullPage: true });
  console.log("screenshot " + shot);
  if (phoneShot) {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.screenshot({ path: phoneShot, fullPage: true });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    check(overflow <= 1, `no sideways scrolling on a phone (overflow ${overflow}px)`);
    await page.setViewportSize({ width: 1100, height: 900 });
  }

  await Promise.all([page.waitForLoadState("load"), it.locator("button:has-text('Review and confirm')").click()]);
  await page.waitForSelector("#confirm-settle");
  const confirm = await page.locator("section.confirm").innerText();
  check(confirm.includes("did not happen") && confirm.includes(key), "settling asks for confirmation first");

  await Promise.all([page.waitForURL(/\/console\/intent\?/), page.click("#confirm-settle")]);
  check(await page.locator(".notice", { hasText: "Settled" }).isVisible(), "settled");
  const reqs = await page.locator("table.provider-requests").innerText();
  const posts = (reqs.match(/POST \/v1\/pix\/charges\s+500/g) || []).length;
  const gets = (reqs.match(/GET \/v1\/pix\/charges\s+404/g) || []).length;
  check(posts >= 1 && gets >= 2, `the provider's own log shows the requests that carried the key (${posts} charges answered 500, ${gets} lookups answered 404)`);
  const history = await page.locator("ol.timeline").innerText();
  check(history.includes("settled by an operator as failed: PSP dashboard: no charge under this key"), "the history shows the settlement and its reason");
  check(history.includes("— alice"), "and who settled it");
  check((await page.locator(".status").first().innerText()).trim() === "failed", "the action is failed");

  await page.setViewportSize({ width: 390, height: 844 });
  const storyOverflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  check(storyOverflow <= 1, `the intent's page fits a phone too (overflow ${storyOverflow}px)`);
  await page.setViewportSize({ width: 1100, height: 900 });

  const cpf = env("CONSOLE_CPF");
  check(!(await page.content()).includes(cpf) && await page.locator("td.masked").count() > 0, "the payload's personal data is masked");
  await Promise.all([
    page.waitForEvent("framenavigated", (f) => f === page.mainFrame()),
    page.click("button:has-text('Reveal personal data')"),
  ]);
  await page.waitForLoadState("load");
  check((await page.locator("table.payload").innerText()).includes(cpf), "and shown when the operator asks (the reveal is recorded)");

  await page.goto(base + "/console/");
  check(await page.locator(`article[data-key="${key}"]`).count() === 0, "and it left the review queue");

  await page.goto(base + "/console/now");
  check(await page.locator(".chart svg").count() === 2, "Now: the spend charts render");
  check((await page.locator("table.counts").first().innerText()).includes("not recorded"), "and the counts say which are not recorded");

  check(problems.length === 0, "no script errors or refused resources: " + problems.join("; "));
} finally {
  await ctx.close();
}
