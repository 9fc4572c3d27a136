// Opens a port's one-time link in Debian's headless chromium (playwright-core)
// over the ingress's TLS, lets the page open a WebSocket to its own origin
// and prints the page's title once the echo came back (or it failed).
// Usage: node ws-h2.mjs LINK DOMAIN
import { chromium } from 'playwright-core'

const [link, domain] = process.argv.slice(2)
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--ignore-certificate-errors',
    `--host-resolver-rules=MAP *.${domain} 127.0.0.1`],
})
try {
  const page = await browser.newPage()
  // what the page is not told: why a request or its WebSocket failed (net::ERR_...)
  const errors = []
  page.on('requestfailed', (r) => errors.push(`${r.url()}: ${r.failure()?.errorText}`))
  page.on('websocket', (ws) => ws.on('socketerror', (e) => errors.push(`${ws.url()}: ${e}`)))
  await page.goto(link)
  await page.waitForFunction(() => document.title.startsWith('got:') || document.title.startsWith('error'),
    null, { timeout: 60000 })
  console.log(JSON.stringify({ title: await page.title(), errors }))
} finally {
  await browser.close()
}
