// A webhook endpoint that accepts a delivery only if the provider's own SDK (or, for
// Paystack and Slack, the provider's documented formula) verifies its signature:
// 200 when it does, 400 when it does not. `retrysafe verify` signs; this judges.
import http from "node:http";
import crypto from "node:crypto";

const provider = process.argv[2];
const secret = process.env.WEBHOOK_SECRET;
const port = Number(process.env.PORT);

async function verifier() {
  switch (provider) {
    case "stripe": {
      const { default: Stripe } = await import("stripe");
      const stripe = new Stripe("sk_test_retrysafe");
      return (body, headers) => {
        stripe.webhooks.constructEvent(body, headers["stripe-signature"], secret);
      };
    }
    case "svix":
    case "standard-webhooks": {
      const { Webhook } = await import("svix");
      const wh = new Webhook(secret);
      return (body, headers) => {
        if (provider === "standard-webhooks" && headers["svix-id"]) throw new Error("expected webhook-* headers");
        wh.verify(body.toString("utf8"), headers);
      };
    }
    case "github": {
      const { Webhooks } = await import("@octokit/webhooks");
      const webhooks = new Webhooks({ secret });
      return async (body, headers) => {
        if (!headers["x-github-delivery"] || !headers["x-github-event"]) throw new Error("missing delivery headers");
        if (!(await webhooks.verify(body.toString("utf8"), headers["x-hub-signature-256"]))) throw new Error("bad signature");
      };
    }
    case "shopify": {
      await import("@shopify/shopify-api/adapters/node");
      const { shopifyApi, ApiVersion } = await import("@shopify/shopify-api");
      const shopify = shopifyApi({
        apiKey: "retrysafe",
        apiSecretKey: secret,
        scopes: [],
        hostName: "127.0.0.1",
        apiVersion: ApiVersion.July25,
        isEmbeddedApp: false,
        logger: { level: 0 },
      });
      return async (body, headers, req, res) => {
        const check = await shopify.webhooks.validate({ rawBody: body.toString("utf8"), rawRequest: req, rawResponse: res });
        if (!check.valid) throw new Error(`shopify: ${check.reason}${check.missingHeaders ? " " + check.missingHeaders : ""}`);
      };
    }
    case "paystack":
      return (body, headers) => {
        const want = crypto.createHmac("sha512", secret).update(body).digest("hex");
        if (want !== headers["x-paystack-signature"]) throw new Error("bad signature");
      };
    case "slack":
      return (body, headers) => {
        const ts = headers["x-slack-request-timestamp"];
        if (Math.abs(Date.now() / 1000 - Number(ts)) > 300) throw new Error("stale timestamp");
        const want = "v0=" + crypto.createHmac("sha256", secret).update(`v0:${ts}:${body}`).digest("hex");
        if (!crypto.timingSafeEqual(Buffer.from(want), Buffer.from(String(headers["x-slack-signature"])))) throw new Error("bad signature");
      };
    default:
      throw new Error(`unknown provider ${provider}`);
  }
}

const verify = await verifier();
http
  .createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", async () => {
      const body = Buffer.concat(chunks);
      try {
        await verify(body, req.headers, req, res);
        res.writeHead(200, { "content-type": "application/json" }).end('{"received":true}');
      } catch (err) {
        console.error(`${provider}: rejected: ${err.message}`);
        res.writeHead(400).end("invalid signature");
      }
    });
  })
  .listen(port, "127.0.0.1");
