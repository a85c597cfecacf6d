// A client generated from entiserve's OpenAPI document (src/schema.d.ts, `npm run gen`) run
// against a live server: sign-in, create, read (a created object's id passed straight to its
// read and change), a dry run, filtered list, a synchronous batch, a background CSV upload, and
// the live changes of campaigns followed as a stream and paged. Every status and value is checked; the first mismatch ends the run
// with a message and exit code 1.
//
// Env: BASE_URL (e.g. http://127.0.0.1:8080), ADMIN_PASSWORD (the `admin` user's password).

import createClient from "openapi-fetch";
import type { components, paths } from "./schema.js";

type Campaign = components["schemas"]["Campaigns"];
type CampaignCreate = components["schemas"]["CampaignsCreate"];

class Mismatch extends Error {}

function check(ok: boolean, what: string): asserts ok {
  if (!ok) throw new Mismatch(what);
}

function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Mismatch(`set ${name}`);
  return value;
}

/** The status of a reply, checked against the one expected. */
function expectStatus(response: Response, expected: number, what: string, error?: unknown): void {
  check(
    response.status === expected,
    `${what}: status ${response.status}, expected ${expected}` +
      (error === undefined ? "" : `: ${JSON.stringify(error)}`),
  );
}

function expectCampaign(got: Campaign, want: CampaignCreate & { id?: number }, what: string): void {
  check(typeof got.id === "number" && got.id > 0, `${what}: id ${JSON.stringify(got.id)}`);
  if (want.id !== undefined) check(got.id === want.id, `${what}: id ${got.id}, expected ${want.id}`);
  check(got.name === want.name, `${what}: name ${JSON.stringify(got.name)}, expected ${want.name}`);
  const type = want.type ?? 1;
  check(got.type === type, `${what}: type ${JSON.stringify(got.type)}, expected ${type}`);
  const active = want.is_active ?? true;
  check(got.is_active === active, `${what}: is_active ${JSON.stringify(got.is_active)}, expected ${active}`);
  const dt = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/;
  check(dt.test(got.created_dt), `${what}: created_dt ${JSON.stringify(got.created_dt)}`);
  check(dt.test(got.updated_dt), `${what}: updated_dt ${JSON.stringify(got.updated_dt)}`);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** One Server-Sent Event. */
interface Sse {
  event: string;
  id: number | undefined;
  data: string;
}

/** Reads the events of a `text/event-stream` body one at a time. */
class EventReader {
  private buffer = "";
  private readonly decoder = new TextDecoder();
  constructor(private readonly reader: ReadableStreamDefaultReader<Uint8Array>) {}

  /** The next event (comments skipped); fails after `ms` milliseconds. */
  async next(ms: number): Promise<Sse> {
    const deadline = Date.now() + ms;
    for (;;) {
      const end = this.buffer.indexOf("\n\n");
      if (end >= 0) {
        const block = this.buffer.slice(0, end);
        this.buffer = this.buffer.slice(end + 2);
        const ev: Sse = { event: "message", id: undefined, data: "" };
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) ev.event = line.slice(6).trim();
          else if (line.startsWith("id:")) ev.id = Number(line.slice(3).trim());
          else if (line.startsWith("data:")) ev.data += line.slice(5).replace(/^ /, "");
        }
        if (ev.data !== "") return ev;
        continue;
      }
      const left = deadline - Date.now();
      check(left > 0, `no event within ${ms} ms`);
      const chunk = await Promise.race([
        this.reader.read(),
        sleep(left).then(() => ({ done: true, value: undefined })),
      ]);
      check(!chunk.done && chunk.value !== undefined, "the event stream ended");
      this.buffer += this.decoder.decode(chunk.value, { stream: true });
    }
  }
}

async function main(): Promise<void> {
  const baseUrl = env("BASE_URL").replace(/\/$/, "");
  const api = createClient<paths>({ baseUrl });
  const tag = `ts-${Date.now()}-${Math.floor(Math.random() * 1e6)}`;

  // Without credentials the API refuses.
  {
    const { error, response } = await api.GET("/users/me");
    expectStatus(response, 401, "GET /users/me without credentials", error);
  }

  // Sign in; every later request carries the bearer token.
  {
    const { data, error, response } = await api.POST("/auth/token", {
      body: { login: "admin", password: env("ADMIN_PASSWORD") },
    });
    expectStatus(response, 200, "POST /auth/token", error);
    check(data !== undefined && /^\S{16,}$/.test(data.token), `POST /auth/token: token ${JSON.stringify(data)}`);
    check(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/.test(data.expires_dt), `POST /auth/token: expires_dt ${data.expires_dt}`);
    const token = data.token;
    api.use({
      onRequest({ request }) {
        request.headers.set("Authorization", `Bearer ${token}`);
        return request;
      },
    });
    const me = await api.GET("/users/me");
    expectStatus(me.response, 200, "GET /users/me with the token", me.error);
    check(me.data?.login === "admin", `GET /users/me: login ${JSON.stringify(me.data?.login)}`);
    console.log("signed in: bearer token until", data.expires_dt);
  }

  // Create one campaign (a single object runs synchronously), read it back, find it by name.
  const wanted: CampaignCreate = { name: `${tag} single`, type: 7, is_active: false };
  let id: number;
  {
    const { data, error, response } = await api.POST("/campaigns", { body: wanted });
    expectStatus(response, 200, "POST /campaigns", error);
    // A 2xx reply here is the object, batch results or a background request's id.
    check(
      data !== undefined && !Array.isArray(data) && "id" in data && typeof data.id === "number",
      `POST /campaigns: ${JSON.stringify(data)}`,
    );
    expectCampaign(data, wanted, "POST /campaigns");
    id = data.id;
  }
  {
    const { data, error, response } = await api.GET("/campaigns/{id}", { params: { path: { id } } });
    expectStatus(response, 200, `GET /campaigns/${id}`, error);
    check(data !== undefined, `GET /campaigns/${id}: no body`);
    expectCampaign(data, { ...wanted, id }, `GET /campaigns/${id}`);
  }
  {
    const name = wanted.name;
    const { data, error, response } = await api.GET("/campaigns", { params: { query: { name } } });
    expectStatus(response, 200, "GET /campaigns?name=...", error);
    check(Array.isArray(data), `GET /campaigns?name=...: ${JSON.stringify(data)}`);
    check(data.length === 1, `GET /campaigns?name=...: ${data.length} objects, expected 1`);
    // Without `fields` a list holds whole objects; the document also allows chosen columns.
    expectCampaign(data[0] as Campaign, { ...wanted, id }, "GET /campaigns?name=...");
    const total = response.headers.get("X-Total-Count");
    check(total === "1", `GET /campaigns?name=...: X-Total-Count ${JSON.stringify(total)}, expected "1"`);
    console.log(`created campaign ${id}, read it back and found it by name`);
  }

  // A created object's `id` goes straight into the path of its read, and what the read returns
  // straight into the next call: in an object ids and required fields are never null (only the
  // object a dry run would create has no id, and that reply has a schema of its own).
  {
    const made = await api.POST("/campaigns", { body: { name: `${tag} straight` } });
    expectStatus(made.response, 200, "POST /campaigns (straight)", made.error);
    check(
      made.data !== undefined && !Array.isArray(made.data) && "id" in made.data && made.data.id !== null,
      `POST /campaigns (straight): ${JSON.stringify(made.data)}`,
    );
    const again = await api.GET("/campaigns/{id}", { params: { path: { id: made.data.id } } });
    expectStatus(again.response, 200, `GET /campaigns/${made.data.id}`, again.error);
    check(again.data !== undefined, `GET /campaigns/${made.data.id}: no body`);
    const name: string = again.data.name;
    check(name === `${tag} straight`, `GET /campaigns/${made.data.id}: name ${JSON.stringify(name)}`);
    const changed = await api.PUT("/campaigns/{id}", {
      params: { path: { id: again.data.id } },
      body: { is_active: false },
    });
    expectStatus(changed.response, 200, `PUT /campaigns/${again.data.id}`, changed.error);
    check(
      changed.data !== undefined && "id" in changed.data && changed.data.id === again.data.id,
      `PUT /campaigns/${again.data.id}: ${JSON.stringify(changed.data)}`,
    );
    check(changed.data.is_active === false, `PUT /campaigns/${again.data.id}: is_active ${changed.data.is_active}`);

    // A dry run's reply for an object it would create: no id, and nothing kept.
    const dry = await api.POST("/campaigns", {
      params: { query: { dry_run: "1" } },
      body: { name: `${tag} dry` },
    });
    expectStatus(dry.response, 200, "POST /campaigns?dry_run=1", dry.error);
    check(
      dry.data !== undefined && !Array.isArray(dry.data) && "id" in dry.data && dry.data.id === null,
      `POST /campaigns?dry_run=1: ${JSON.stringify(dry.data)}`,
    );
    check(dry.data.name === `${tag} dry`, `POST /campaigns?dry_run=1: name ${JSON.stringify(dry.data.name)}`);
    console.log(`campaign ${made.data.id}: its id passed straight to GET and PUT; a dry run answered without an id`);
  }

  // A synchronous batch of three creates: one result item per input item, in order.
  {
    const items: CampaignCreate[] = [
      { name: `${tag} batch 1` },
      { name: `${tag} batch 2`, type: 2 },
      { name: `${tag} batch 3`, is_active: false, description: "third" },
    ];
    const { data, error, response } = await api.POST("/campaigns", {
      params: { query: { bgrs: "false" } },
      body: items,
    });
    expectStatus(response, 200, "POST /campaigns?bgrs=false (batch)", error);
    check(Array.isArray(data), `batch: ${JSON.stringify(data)}`);
    check(data.length === items.length, `batch: ${data.length} result items, expected ${items.length}`);
    data.forEach((item, i) => {
      check(item.status === 200, `batch item ${i}: status ${item.status}: ${item.body}`);
      const created = JSON.parse(item.body) as Campaign;
      expectCampaign(created, items[i]!, `batch item ${i}`);
    });
    console.log("batch: 3 items created, each with status 200");
  }

  // A CSV upload in the background: 202 with the request id, then its record and result.
  {
    const names = [1, 2, 3].map((n) => `${tag} upload ${n}`);
    const csv = ["op,name,type", ...names.map((name, i) => `c,${name},${i + 1}`)].join("\n") + "\n";
    const { data, error, response } = await api.POST("/tools/uploader.ex.php", {
      body: { entity: "campaigns", bgrs: "1", csvfile: csv },
      bodySerializer(body) {
        const form = new FormData();
        form.append("entity", body.entity);
        if (body.bgrs !== undefined) form.append("bgrs", body.bgrs);
        form.append("csvfile", new Blob([body.csvfile], { type: "text/csv" }), "campaigns.csv");
        return form;
      },
    });
    expectStatus(response, 202, "POST /tools/uploader.ex.php (bgrs=1)", error);
    check(
      typeof data === "object" && /^[0-9a-f]{32}$/.test(data.request),
      `upload: reply ${JSON.stringify(data)}, expected {"request": "<32 hex>"}`,
    );
    const rid = data.request;

    const deadline = Date.now() + 30_000;
    for (;;) {
      const bg = await api.GET("/bgrs/{rid}", { params: { path: { rid } } });
      expectStatus(bg.response, 200, `GET /bgrs/${rid}`, bg.error);
      check(bg.data?.length === 1, `GET /bgrs/${rid}: ${JSON.stringify(bg.data)}`);
      const record = bg.data[0]!;
      check(record.rid === rid && record.name === "uploader", `GET /bgrs/${rid}: ${JSON.stringify(record)}`);
      if (record.status_name === "finished") {
        check(record.status_id === "4", `GET /bgrs/${rid}: status_id ${record.status_id}`);
        check(record.status === "200", `GET /bgrs/${rid}: status ${record.status}`);
        check(record.progress === "100.00", `GET /bgrs/${rid}: progress ${record.progress}`);
        check(record.result.endsWith(".csv"), `GET /bgrs/${rid}: result ${record.result}`);
        break;
      }
      check(record.status_name === "in progress", `GET /bgrs/${rid}: status_name ${record.status_name}`);
      check(Date.now() < deadline, `GET /bgrs/${rid}: not finished after 30 s`);
      await sleep(200);
    }

    const result = await api.GET("/bgrs/{rid}/result", { params: { path: { rid } }, parseAs: "text" });
    expectStatus(result.response, 200, `GET /bgrs/${rid}/result`, result.error);
    const type = result.response.headers.get("Content-Type") ?? "";
    check(type.startsWith("text/csv"), `GET /bgrs/${rid}/result: Content-Type ${type}`);
    const lines = (result.data ?? "").trim().split(/\r?\n/);
    check(lines[0] === "res,id,op,name,type", `result CSV header ${JSON.stringify(lines[0])}`);
    check(lines.length === names.length + 1, `result CSV: ${lines.length - 1} rows, expected ${names.length}`);
    names.forEach((name, i) => {
      const line = lines[i + 1]!;
      check(new RegExp(`^OK,\\d+,c,${name},${i + 1}$`).test(line), `result CSV row ${i + 1}: ${line}`);
    });
    console.log(`upload ${rid}: finished, ${names.length} rows OK`);
  }

  // Live changes: follow campaigns, see a create and an update arrive, then page them.
  {
    const abort = new AbortController();
    const { response } = await api.GET("/campaigns/events", {
      params: { query: { fields: "id,name" } },
      parseAs: "stream",
      signal: abort.signal,
    });
    expectStatus(response, 200, "GET /campaigns/events", undefined);
    const type = response.headers.get("Content-Type") ?? "";
    check(type.startsWith("text/event-stream"), `GET /campaigns/events: Content-Type ${type}`);
    check(response.body !== null, "GET /campaigns/events: no body");
    const events = new EventReader(response.body.getReader());
    const ready = await events.next(10_000);
    check(ready.event === "ready" && ready.id !== undefined, `first event ${JSON.stringify(ready)}`);
    const made = await api.POST("/campaigns", { body: { name: `${tag} live` } });
    expectStatus(made.response, 200, "POST /campaigns (live)", made.error);
    const liveId = (made.data as Campaign).id;
    await api.PUT("/campaigns/{id}", { params: { path: { id: liveId } }, body: { name: `${tag} live 2` } });
    const seen: Sse[] = [];
    while (seen.length < 2) {
      const ev = await events.next(10_000);
      const data = JSON.parse(ev.data) as { op: string; id: number; object: { id: number; name: string } };
      if (data.id === liveId) seen.push(ev);
    }
    abort.abort();
    const ops = seen.map((e) => `${e.event}:${(JSON.parse(e.data) as { object: { name: string } }).object.name}`);
    check(
      ops[0] === `create:${tag} live` && ops[1] === `update:${tag} live 2`,
      `live events ${JSON.stringify(ops)}`,
    );
    check(seen[0]!.id! > ready.id! && seen[1]!.id! > seen[0]!.id!, "event ids grow");
    const page = await api.GET("/campaigns/changes", { params: { query: { after: ready.id!, limit: 100 } } });
    expectStatus(page.response, 200, "GET /campaigns/changes", page.error);
    const mine = (page.data?.changes ?? []).filter((c) => c.id === liveId).map((c) => `${c.op}@${c.seq}`);
    check(
      mine.join(",") === `create@${seen[0]!.id},update@${seen[1]!.id}`,
      `GET /campaigns/changes: ${JSON.stringify(mine)}`,
    );
    console.log(`live: create and update of ${liveId} followed (ids ${seen[0]!.id}, ${seen[1]!.id}) and paged`);
  }
}

main().then(
  () => console.log("TypeScript client: all checks passed"),
  (e: unknown) => {
    console.error(e instanceof Mismatch ? `TypeScript client check failed: ${e.message}` : e);
    process.exit(1);
  },
);
