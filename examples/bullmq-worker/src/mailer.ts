import nodemailer from "nodemailer";

const transport = nodemailer.createTransport({
  host: process.env.SMTP_HOST,
  port: 587,
  auth: { user: process.env.SMTP_USER, pass: process.env.SMTP_PASS },
});

const subjects = {
  welcome: "Welcome aboard",
  "trial-ending": "Your trial ends in 3 days",
  receipt: "Your receipt",
} as const;

export async function sendTemplate(to: string, template: keyof typeof subjects, vars: Record<string, string>) {
  const html = Object.entries(vars).reduce(
    (body, [k, v]) => body.replaceAll(`{{${k}}}`, v),
    `<p>{{greeting}}</p>`,
  );
  await transport.sendMail({ from: "Acme <hello@acme.dev>", to, subject: subjects[template], html });
}
