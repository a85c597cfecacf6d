// Must not compile without its directive: a batch item whose `type` (an integer field of
// campaigns) is a string. tsc reports an unused directive when the document leaves batch items
// untyped. scripts/api-clients.sh also checks that tsc fails once the directive is removed.

import type { Client } from "openapi-fetch";
import type { paths } from "./schema.js";

declare const api: Client<paths>;

export const wrongItemType = () =>
  // @ts-expect-error a batch item's `type` is an integer
  api.POST("/campaigns", { params: { query: { bgrs: "false" } }, body: [{ name: "x", type: "not a number" }] });
