// Ambient declarations for the SDK and framework modules the fixtures import: every package
// import is `any`, so the compiler checks what codemods can break (names in scope, syntax,
// async/await, the guard's call shape) without the packages installed. Framework modules
// whose TYPES the fixtures import are spelled out: a type imported from a shorthand module
// does not resolve to `any`.
declare module "*";

declare module "express" {
  const express: any;
  export default express;
  export type Request = any;
  export type Response = any;
  export type NextFunction = any;
  export type RequestHandler = any;
  export type Express = any;
  export type Application = any;
  export type Router = any;
  export const Router: any;
  export const json: any;
  export const raw: any;
  export const text: any;
  export const urlencoded: any;
}

declare module "next" {
  export type NextApiRequest = any;
  export type NextApiResponse = any;
  export type NextApiHandler = any;
  export type PageConfig = any;
}

declare module "next/server" {
  export type NextRequest = any;
  export const NextRequest: any;
  export type NextResponse = any;
  export const NextResponse: any;
  export const after: any;
}

declare module "fastify" {
  const fastify: any;
  export default fastify;
  export type FastifyRequest = any;
  export type FastifyReply = any;
  export type FastifyInstance = any;
  export type FastifyPluginAsync = any;
}

declare module "hono" {
  export type Context = any;
  export const Hono: any;
  export type Hono = any;
}

declare module "koa" {
  const Koa: any;
  export default Koa;
  export type Context = any;
  export type Next = any;
}

declare module "aws-lambda" {
  export type SQSEvent = any;
  export type SQSRecord = any;
  export type SQSHandler = any;
  export type SQSBatchResponse = any;
  export type SQSBatchItemFailure = any;
  export type Context = any;
  export type APIGatewayProxyEvent = any;
  export type APIGatewayProxyResult = any;
}

declare module "bullmq" {
  export const Worker: any;
  export type Worker = any;
  export const Queue: any;
  export type Queue = any;
  export type Job = any;
  export const UnrecoverableError: any;
  export const FlowProducer: any;
}

declare module "stripe" {
  const Stripe: any;
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Stripe {
    type Event = any;
    type Invoice = any;
    type Subscription = any;
    type PaymentIntent = any;
    type Charge = any;
    type Customer = any;
    type Refund = any;
    namespace Checkout {
      type Session = any;
    }
  }
  export default Stripe;
}

// Nuxt/Nitro auto-imports h3's helpers as globals (its generated `.nuxt` types declare them).
declare function defineEventHandler(handler: any): any;
declare function eventHandler(handler: any): any;
declare function readRawBody(event: any, encoding?: any): Promise<any>;
declare function readBody(event: any): Promise<any>;
declare function getHeader(event: any, name: string): string | undefined;
declare function getRequestHeader(event: any, name: string): string | undefined;
declare function setResponseStatus(event: any, code: number, text?: string): void;
declare function sendNoContent(event: any, code?: number): any;
declare function createError(input: any): Error;
declare function useRuntimeConfig(event?: any): any;
