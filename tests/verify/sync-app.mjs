// Answers every delivery synchronously, so concurrent deliveries can never overlap in the
// handler and no database point is ever reached: verify must call both inconclusive.
import http from "node:http";
import crypto from "node:crypto";

const secret = process.env.WEBHOOK_SECRET;
http
  .createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const ok = crypto.createHmac("sha512", secret).update(body).digest("hex") === req.headers["x-paystack-signature"];
      res.writeHead(ok ? 200 : 401).end();
    });
  })
  .listen(Number(process.env.PORT), "127.0.0.1");
