// The OpenID Provider the test suite signs in through: panva's oidc-provider (OpenID-certified),
// pinned in package-lock.json, configured as a team's identity provider would be for the
// control plane: authorization code flow, PKCE required of every client, RS256 ID tokens signed
// with keys made at start, groups in a claim (in the ID token and from userinfo), revocation and
// dynamic registration (the browser test registers its live server's redirect URI).
//
// Started by tests/oidc/provider.py. Reads its configuration from the environment:
//   CONTROL_TOKEN  the secret the test sends to the /__test__/ endpoints below
//   CLIENTS        JSON list of static clients ({client_id, client_secret, redirect_uris})
//   PORT           0 (default) for any free port
// and prints one JSON line when it listens: {"issuer": ..., "port": ...}.
//
// What a real provider does not have, and the tests need, lives under /__test__/ and answers
// only to CONTROL_TOKEN: accounts whose groups the test changes while the provider runs, the
// provider's clock moved on (its tokens expire as they would), and the next token response
// tampered with as an attacker or a broken provider would (another key, another audience).

import { createServer } from 'node:http';

import * as jose from 'jose';
import Provider from 'oidc-provider';

const CONTROL_TOKEN = process.env.CONTROL_TOKEN || '';
if (CONTROL_TOKEN.length < 16) {
  console.error('CONTROL_TOKEN (16 characters or more) is required');
  process.exit(2);
}
const CLIENTS = JSON.parse(process.env.CLIENTS || '[]');

// The provider's clock, which the tests may move on: oidc-provider and jose read Date.now().
const realNow = Date.now.bind(Date);
let clockOffsetMs = 0;
Date.now = () => realNow() + clockOffsetMs;

// Keys made at start: the provider's own, and a rogue one under the same key id that signs
// forged ID tokens (a relying party must refuse those on the signature alone).
const KID = `test-${Math.random().toString(36).slice(2, 10)}`;
// An RSA key takes a second or more to make on a busy machine: the rogue one is made when a
// test first asks for it, not at every start.
let roguePending = null;
const rogueKey = () => { roguePending ??= jose.generateKeyPair('RS256'); return roguePending; };
const signing = await jose.generateKeyPair('RS256', { extractable: true });
const privateJwk = { ...(await jose.exportJWK(signing.privateKey)), kid: KID, alg: 'RS256', use: 'sig' };

// sub -> { password, claims, userinfoOnly }; the tests put and remove accounts while the provider runs.
const accounts = new Map();

let tamperNext = null; // how to alter the next token response's ID token, once
let lastTokenResponse = null; // what the token endpoint last answered, for the secrets test

const server = createServer();
await new Promise((resolve) => { server.listen(Number(process.env.PORT || 0), '127.0.0.1', resolve); });
const { port } = server.address();
const issuer = `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  clients: CLIENTS.map((client) => ({
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
    ...client,
  })),
  jwks: { keys: [privateJwk] },
  cookies: { keys: [CONTROL_TOKEN] },
  claims: {
    openid: ['sub'],
    profile: ['name', 'preferred_username'],
    email: ['email', 'email_verified'],
    groups: ['groups'],
  },
  // Groups in the ID token as well as from userinfo, as Okta, Entra ID and Keycloak can be told.
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: false },
    revocation: { enabled: true },
    registration: { enabled: true },
  },
  async findAccount(ctx, sub) {
    const account = accounts.get(sub);
    if (!account) return undefined;
    return {
      accountId: sub,
      // use: "id_token" or "userinfo"; some providers keep groups out of ID tokens.
      async claims(use) {
        const claims = { sub, ...account.claims };
        if (use === 'id_token') for (const name of account.userinfoOnly) delete claims[name];
        return claims;
      },
    };
  },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  renderError(ctx, out) {
    ctx.type = 'html';
    ctx.body = `<!DOCTYPE html><title>Error</title><h1>${escape(out.error)}</h1>`
      + `<p>${escape(out.error_description || '')}</p>`;
  },
});

function escape(text) {
  return String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return Buffer.concat(chunks).toString('utf8');
}

function loginPage(uid, message) {
  return `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Test IdP: sign in</title></head>
<body>
<h1>Test IdP</h1>
${message ? `<p class="error">${escape(message)}</p>` : ''}
<form method="post" action="/interaction/${escape(uid)}/login">
  <label>Login <input name="login" autocomplete="username" autofocus></label>
  <label>Password <input name="password" type="password" autocomplete="current-password"></label>
  <button type="submit">Continue</button>
</form>
</body></html>`;
}

// The provider's sign-in and consent steps (oidc-provider ships none): a password form, and
// consent given at once, as for a first-party application.
async function interaction(ctx, uid, action) {
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  if (details.uid !== uid) ctx.throw(400, 'interaction mismatch');
  const { prompt, params, session } = details;
  if (action === 'login' && ctx.method === 'POST') {
    const form = new URLSearchParams(await readBody(ctx.req));
    const login = form.get('login') || '';
    const account = accounts.get(login);
    if (!account || account.password !== form.get('password')) {
      ctx.type = 'html';
      ctx.body = loginPage(uid, 'Invalid login or password.');
      return;
    }
    await provider.interactionFinished(ctx.req, ctx.res, { login: { accountId: login } }, {
      mergeWithLastSubmission: false,
    });
    ctx.respond = false;
    return;
  }
  if (prompt.name === 'login') {
    ctx.type = 'html';
    ctx.body = loginPage(uid, '');
    return;
  }
  if (prompt.name === 'consent') {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    if (prompt.details.missingOIDCScope) grant.addOIDCScope(prompt.details.missingOIDCScope.join(' '));
    if (prompt.details.missingOIDCClaims) grant.addOIDCClaims(prompt.details.missingOIDCClaims);
    const grantId = await grant.save();
    await provider.interactionFinished(ctx.req, ctx.res, { consent: { grantId } }, {
      mergeWithLastSubmission: true,
    });
    ctx.respond = false;
    return;
  }
  ctx.throw(400, `unexpected prompt ${prompt.name}`);
}

async function control(ctx) {
  if (ctx.get('x-test-control') !== CONTROL_TOKEN) ctx.throw(403, 'not for you');
  const body = ['PUT', 'POST'].includes(ctx.method) ? JSON.parse((await readBody(ctx.req)) || '{}') : {};
  const account = ctx.path.match(/^\/__test__\/accounts\/([^/]+)$/);
  if (account && ctx.method === 'PUT') {
    const sub = decodeURIComponent(account[1]);
    accounts.set(sub, {
      password: body.password,
      claims: body.claims || {},
      userinfoOnly: body.userinfo_only || [],
    });
  } else if (account && ctx.method === 'DELETE') {
    accounts.delete(decodeURIComponent(account[1]));
  } else if (ctx.path === '/__test__/clock' && ctx.method === 'POST') {
    clockOffsetMs = Number(body.offset_seconds || 0) * 1000;
  } else if (ctx.path === '/__test__/tamper' && ctx.method === 'POST') {
    tamperNext = body.mode || null;
  } else if (ctx.path === '/__test__/last_token' && ctx.method === 'GET') {
    ctx.body = lastTokenResponse || {};
    return;
  } else {
    ctx.throw(404, 'no such control');
  }
  ctx.status = 204;
}

// The next ID token, altered: signed with the rogue key (same claims, same key id), its
// payload changed under the provider's signature, or re-signed by the provider for another
// audience, or already expired.
async function tampered(idToken, mode, clientId) {
  const [header, payload, signature] = idToken.split('.');
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  const now = Math.floor(Date.now() / 1000);
  const sign = (key, changes) => new jose.SignJWT({ ...claims, ...changes })
    .setProtectedHeader({ alg: 'RS256', kid: KID, typ: 'JWT' })
    .sign(key);
  switch (mode) {
    case 'rogue_key':
      return sign((await rogueKey()).privateKey, {});
    case 'tampered_payload': {
      const altered = { ...claims, groups: [...(claims.groups || []), 'platform-admins'] };
      return `${header}.${Buffer.from(JSON.stringify(altered)).toString('base64url')}.${signature}`;
    }
    case 'wrong_audience':
      // azp names the client, so only the audience check can refuse it.
      return sign(signing.privateKey, { aud: 'some-other-application', azp: clientId });
    case 'wrong_issuer':
      return sign(signing.privateKey, { iss: 'http://127.0.0.1:1' });
    case 'expired':
      return sign(signing.privateKey, { iat: now - 7200, exp: now - 3600 });
    case 'alg_none':
      return `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url')}.${payload}.`;
    default:
      throw new Error(`unknown tamper mode ${mode}`);
  }
}

provider.use(async (ctx, next) => {
  if (ctx.path.startsWith('/__test__/')) {
    await control(ctx);
    return;
  }
  const step = ctx.path.match(/^\/interaction\/([\w-]+)(?:\/(login))?$/);
  if (step) {
    await interaction(ctx, step[1], step[2]);
    return;
  }
  await next();
  if (ctx.path === '/token' && ctx.status === 200 && ctx.body?.id_token && tamperNext) {
    const mode = tamperNext;
    tamperNext = null;
    ctx.body = { ...ctx.body, id_token: await tampered(ctx.body.id_token, mode, ctx.oidc?.client?.clientId) };
  }
  if (ctx.path === '/token' && ctx.status === 200) lastTokenResponse = ctx.body;
});

server.on('request', provider.callback());
process.stdout.write(`${JSON.stringify({ issuer, port })}\n`);

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => { server.close(); process.exit(0); });
}
