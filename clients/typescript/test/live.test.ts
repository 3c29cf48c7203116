/**
 * The client against a live `cogsub run` (hash embedder, fresh data directory, API keys on):
 * the seed's calls exactly as it writes them, recall by type, reads, forgets, export and
 * import, consolidation, and every error class from a real answer.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import {
  AuthenticationError,
  CogsubError,
  ConflictError,
  InvalidInputError,
  MemoryClient,
  NotConfiguredError,
  NotFoundError,
  PermissionDeniedError,
} from "../src/index.js";
import { type LiveServer, startServer } from "../test-support/live-server.js";

const OPERATOR_KEY = "ops-key-0123456789abcdef";
const ALICE_KEY = "alice-key-0123456789abcd";
const ALICE = "alice-ts";
const PACKAGE_DIR = new URL("../..", import.meta.url).pathname;

let server: LiveServer;
let cm: MemoryClient;

before(async () => {
  const keys = { [OPERATOR_KEY]: ["*"], [ALICE_KEY]: [ALICE] };
  server = await startServer({ COGSUB_API__KEYS: JSON.stringify(keys) });
  cm = new MemoryClient({ baseUrl: server.url, apiKey: OPERATOR_KEY, timeoutMs: 20_000 });
});

after(async () => {
  await server?.stop();
});

let banks = 0;
const freshBank = (): string => `ts-bank-${process.pid}-${(banks += 1)}`;

describe("the seed's calls, as written", () => {
  test("each typed block is kept and recallable by its type", async () => {
    const bank = freshBank();
    const steps = ["make build", "kubectl apply -f prod.yaml", "curl /health"];
    const procedure = await cm.retainProcedure(bank, steps, {
      rationale: "standard prod deploy",
      wait: true,
    });
    const reasoning = await cm.retainReasoning(
      bank,
      "Chose gRPC over REST: p99 latency mattered more.",
      { wait: true },
    );
    const preference = await cm.retainPreference(
      bank,
      "For day-planning, use personal Gmail, never work mail.",
      {
        wait: true,
      },
    );
    const correction = await cm.retainCorrection(bank, "No — drain the pod before restart.", {
      wait: true,
    });
    const profile = await cm.updateProfile(bank, "Has admin on AWS, GitHub, and Grafana.", {
      wait: true,
    });
    const world = await cm.retain(bank, "Acme HQ is in Berlin.", { factType: "world", wait: true });

    const kept = { procedure, reasoning, preference, correction, profile, world };
    for (const [type, result] of Object.entries(kept)) {
      assert.equal(result.fact_type, type);
      assert.equal(result.bank_id, bank);
      assert.equal(result.recallable, true, `${type} should be recallable after wait`);
    }

    const procedures = await cm.recall(bank, "how do I deploy?", { types: ["procedure"] });
    assert.deepEqual(
      procedures.results.map((hit) => hit.id),
      [procedure.memory_id],
    );
    assert.deepEqual(procedures.results[0]?.steps, steps);
    assert.equal(procedures.results[0]?.rationale, "standard prod deploy");

    const rules = await cm.recall(bank, "how should I handle this?", {
      types: ["preference", "correction"],
    });
    assert.deepEqual(
      rules.results.map((hit) => hit.id).sort(),
      [preference.memory_id, correction.memory_id].sort(),
    );
    const everything = await cm.recall(bank, "deploy");
    assert.equal(everything.results.length, 6);
    const hit = everything.results[0];
    assert.ok(hit && typeof hit.explain.final === "number" && hit.score > 0);
  });

  test("a procedure v2 supersedes v1: recall returns v2, v1 stays readable", async () => {
    const bank = freshBank();
    const v1 = await cm.retainProcedure(bank, ["restart the pod"], { wait: true });
    const v2 = await cm.retainProcedure(bank, ["drain the pod", "restart the pod"], {
      supersedes: v1.memory_id,
      rationale: "drain first",
      wait: true,
    });
    assert.equal(v2.version, 2);
    const found = await cm.recall(bank, "restart the pod", { types: ["procedure"] });
    assert.deepEqual(
      found.results.map((h) => h.id),
      [v2.memory_id],
    );
    const old = await cm.getMemory(bank, v1.memory_id);
    assert.match(old.text, /restart the pod/);
  });

  test("a retain with its own id is idempotent, and one of known content is reinforced", async () => {
    const bank = freshBank();
    const first = await cm.retain(bank, "The staging cluster is in eu-west-1.", {
      memoryId: "fact-1",
      wait: true,
    });
    const again = await cm.retain(bank, "The staging cluster is in eu-west-1.", {
      memoryId: "fact-1",
      wait: true,
    });
    assert.equal(again.memory_id, first.memory_id);
    const copy = await cm.retain(bank, "The staging cluster is in eu-west-1.", { wait: true });
    assert.equal(copy.memory_id, "fact-1");
    assert.equal(copy.reinforced, true);
  });
});

describe("reads, forgets, export and import", () => {
  test("getMemory returns the record; after forget it is NotFoundError", async () => {
    const bank = freshBank();
    const kept = await cm.retain(bank, "Jane's badge number is 4471.", {
      tags: ["badge"],
      context: { sessionId: "s-1" },
      wait: true,
    });
    const record = await cm.getMemory(bank, kept.memory_id);
    assert.equal(record.text, "Jane's badge number is 4471.");
    assert.deepEqual(record.tags, ["badge"]);
    const report = await cm.forget(bank, kept.memory_id);
    assert.equal(report.forgotten[0], kept.memory_id);
    await assert.rejects(cm.getMemory(bank, kept.memory_id), NotFoundError);
    const after = await cm.recall(bank, "badge number");
    assert.equal(after.results.length, 0);
  });

  test("export streams header, objects and trailer; import brings a forgotten bank back", async () => {
    const bank = freshBank();
    await cm.retainPreference(bank, "Prefers tea over coffee in the afternoon.", { wait: true });
    await cm.retain(bank, "The office wifi is called acme-guest.", {
      factType: "world",
      wait: true,
    });
    const lines: string[] = [];
    for await (const line of cm.export(bank)) lines.push(line);
    assert.ok(lines.length >= 4, `header, two objects, trailer; got ${lines.length}`);
    for (const line of lines) JSON.parse(line); // every line is one JSON value

    await assert.rejects(cm.forgetBank(bank, { confirm: "another-bank" }), InvalidInputError);
    const erased = await cm.forgetBank(bank, { confirm: bank });
    assert.equal(erased.complete, true);
    assert.equal((await cm.recall(bank, "tea")).results.length, 0);

    const replayed = async function* (): AsyncGenerator<string> {
      yield* lines; // as export's own iterator hands them over
    };
    const imported = await cm.importBank(bank, replayed());
    assert.equal(imported.complete, true);
    assert.equal(imported.invalid, 0);
    assert.ok(imported.imported > 0);
    const back = await cm.recall(bank, "tea or coffee", { types: ["preference"] });
    assert.match(back.results[0]?.text ?? "", /tea/);
  });

  test("consolidate runs one round of the bank and a second finds nothing new", async () => {
    const bank = freshBank();
    await cm.retainCorrection(bank, "No — drain the pod before restart.", { wait: true });
    const first = await cm.consolidate(bank);
    assert.equal(first.bank_id, bank);
    const second = await cm.consolidate(bank);
    assert.deepEqual(second.preferences ?? [], []);
    assert.deepEqual(second.observations ?? [], []);
  });

  test("feedback counts the memories it updated", async () => {
    const bank = freshBank();
    const kept = await cm.retain(bank, "Deploys happen on Tuesdays.", { wait: true });
    assert.equal(await cm.feedback(bank, [kept.memory_id], "helpful"), 1);
    await assert.rejects(cm.feedback(bank, ["no-such-memory"]), NotFoundError);
  });
});

describe("listing, history and update", () => {
  test("listMemories pages newest first, each memory once, with the filters", async () => {
    const bank = freshBank();
    const ids: string[] = [];
    for (let i = 0; i < 5; i += 1) {
      const timestamp = new Date(Date.UTC(2026, 0, 1 + i));
      const kept = await cm.retain(bank, `Meeting note number ${i}.`, {
        factType: "world",
        timestamp,
        tags: [`n${i % 2}`],
      });
      ids.push(kept.memory_id);
    }
    await cm.retainPreference(bank, "Prefers short meetings.", {
      wait: true,
      timestamp: "2025-06-01T00:00:00Z",
    });
    await waitUntilRecallable(bank, ids);
    const pages: string[][] = [];
    for await (const page of cm.listMemories(bank, { types: ["world"], limit: 2 })) {
      pages.push(page.memories.map((m) => m.id));
    }
    assert.deepEqual(
      pages.map((p) => p.length),
      [2, 2, 1],
    );
    assert.deepEqual(pages.flat(), [...ids].reverse(), "newest first, each once");
    const tagged: string[] = [];
    for await (const page of cm.listMemories(bank, {
      tags: ["n0"],
      since: new Date(Date.UTC(2026, 0, 2)),
    })) {
      tagged.push(...page.memories.map((m) => m.id));
    }
    assert.deepEqual(tagged, [ids[4], ids[2]]);
  });

  test("listMemories finds a tag holding a comma, alone or beside another", async () => {
    const bank = freshBank();
    const odd = await cm.retain(bank, "Team infra owns the pager.", {
      tags: ["team,infra"],
      wait: true,
    });
    const plain = await cm.retain(bank, "Team web owns the site.", { tags: ["web"], wait: true });
    const listed = async (tags: string[]): Promise<string[]> => {
      const ids: string[] = [];
      for await (const page of cm.listMemories(bank, { tags })) {
        ids.push(...page.memories.map((m) => m.id));
      }
      return ids.sort();
    };
    assert.deepEqual(await listed(["team,infra"]), [odd.memory_id]);
    assert.deepEqual(await listed(["team,infra", "web"]), [odd.memory_id, plain.memory_id].sort());
  });

  test("a walk through the pages sees each memory present throughout exactly once, while writes go on", async () => {
    const bank = freshBank();
    let seed = 7;
    const random = (): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const at = (): Date => new Date(Date.UTC(2026, 0, 1) + Math.floor(random() * 30 * 86_400_000));
    const originals: string[] = [];
    for (let i = 0; i < 24; i += 1) {
      originals.push(
        (await cm.retain(bank, `Original note ${i}.`, { timestamp: at(), memoryId: `orig-${i}` }))
          .memory_id,
      );
    }
    await waitUntilRecallable(bank, originals);
    const forgotten = new Set<string>();
    const seen: string[] = [];
    let written = 0;
    for await (const page of cm.listMemories(bank, { limit: 4 })) {
      seen.push(...page.memories.map((m) => m.id));
      // Between pages: a new memory anywhere in time, and one not yet seen forgotten.
      await cm.retain(bank, `Written during the walk ${written}.`, {
        timestamp: at(),
        memoryId: `new-${written}`,
      });
      written += 1;
      const victim = originals.find((id) => !seen.includes(id) && !forgotten.has(id));
      if (victim !== undefined && forgotten.size < 5) {
        await cm.forget(bank, victim);
        forgotten.add(victim);
      }
    }
    assert.equal(new Set(seen).size, seen.length, "no memory twice");
    const present = originals.filter((id) => !forgotten.has(id));
    assert.deepEqual(
      present.filter((id) => !seen.includes(id)),
      [],
      "none present throughout was skipped",
    );
    assert.ok(forgotten.size === 5 && [...forgotten].every((id) => !seen.includes(id)));
  });

  test("listBanks shows the banks a key grants, with counts by type", async () => {
    const bank = freshBank();
    await cm.retainCorrection(bank, "No — use the staging cluster first.", { wait: true });
    await cm.retain(bank, "Staging is in eu-west-1.", { factType: "world", wait: true });
    const all = [];
    for await (const page of cm.listBanks({ limit: 3 })) all.push(...page.banks);
    const mine = all.find((b) => b.bank_id === bank);
    assert.ok(mine, `${bank} in ${all.map((b) => b.bank_id).join(", ")}`);
    assert.equal(mine.total, 2);
    assert.deepEqual(mine.counts, { correction: 1, world: 1 });
    assert.equal(new Set(all.map((b) => b.bank_id)).size, all.length, "each bank once");

    const alice = new MemoryClient({ baseUrl: server.url, apiKey: ALICE_KEY });
    await alice.retain(ALICE, "Alice keeps her notes here.", { wait: true });
    const seen = [];
    for await (const page of alice.listBanks()) seen.push(...page.banks.map((b) => b.bank_id));
    assert.deepEqual(seen, [ALICE], "a key for one bank lists that bank only");
    await assert.rejects(alice.listMemories(bank).next(), PermissionDeniedError);
    await assert.rejects(alice.history(bank, "any-id"), PermissionDeniedError);
    await assert.rejects(alice.update(bank, "any-id", { content: "x" }), PermissionDeniedError);
  });

  test("update makes a new version: recall finds it, the old stays readable and in history", async () => {
    const bank = freshBank();
    const old = await cm.retainPreference(bank, "Send reports on Fridays.", { wait: true });
    const next = await cm.update(bank, old.memory_id, {
      content: "Send reports on Mondays.",
      wait: true,
    });
    assert.notEqual(next.memory_id, old.memory_id);
    const found = await cm.recall(bank, "when do reports go out?", { types: ["preference"] });
    assert.deepEqual(
      found.results.map((h) => h.id),
      [next.memory_id],
    );
    assert.equal((await cm.getMemory(bank, old.memory_id)).text, "Send reports on Fridays.");
    const lineage = await cm.history(bank, old.memory_id);
    assert.equal(lineage.superseded_by?.superseded_by, next.memory_id);
    assert.deepEqual(
      lineage.versions.map((v) => v.memory_id),
      [old.memory_id, next.memory_id],
    );
    assert.equal(lineage.versions.find((v) => v.current)?.memory_id, next.memory_id);
  });

  test("history traces a preference back to the correction it was distilled from", async () => {
    const bank = freshBank();
    const correction = await cm.retainCorrection(
      bank,
      "No — for day-planning use my personal Gmail, never the work mail.",
      { wait: true },
    );
    const round = await cm.consolidate(bank);
    const [preference] = round.preferences ?? [];
    assert.ok(preference, `the round distilled a preference: ${JSON.stringify(round)}`);
    const lineage = await cm.history(bank, preference);
    assert.equal(lineage.memory.fact_type, "preference");
    assert.deepEqual(
      lineage.corrections.map((c) => [c.memory_id, c.relation]),
      [[correction.memory_id, "correction"]],
    );
  });

  test("history traces a procedure v1 -> v2", async () => {
    const bank = freshBank();
    const v1 = await cm.retainProcedure(bank, ["restart the pod"], { wait: true });
    const v2 = await cm.retainProcedure(bank, ["drain the pod", "restart the pod"], {
      supersedes: v1.memory_id,
      wait: true,
    });
    const lineage = await cm.history(bank, v2.memory_id);
    assert.deepEqual(
      lineage.versions.map((v) => [v.memory_id, v.version]),
      [
        [v1.memory_id, 1],
        [v2.memory_id, 2],
      ],
    );
    assert.deepEqual(
      lineage.supersedes.map((r) => r.memory_id),
      [v1.memory_id],
    );
    await assert.rejects(cm.history(bank, "no-such-memory"), NotFoundError);
  });
});

async function waitUntilRecallable(bank: string, ids: string[]): Promise<void> {
  for (const id of ids) {
    for (let tries = 0; ; tries += 1) {
      try {
        await cm.getMemory(bank, id);
        break;
      } catch (error) {
        if (!(error instanceof NotFoundError) || tries > 100) throw error;
        await new Promise((done) => setTimeout(done, 50));
      }
    }
  }
}

describe("context and answer", () => {
  test("context lays the bank out by section, each item with its memory id, within the budget", async () => {
    const bank = freshBank();
    const rule = await cm.retainPreference(bank, "Always drain the pod before a restart.", {
      wait: true,
    });
    const how = await cm.retainProcedure(bank, ["drain the pod", "restart the pod"], {
      wait: true,
    });
    const block = await cm.context(bank, "restart the pod", { maxTokens: 500 });
    assert.equal(block.bank_id, bank);
    assert.ok(block.tokens <= 500 && block.max_tokens === 500);
    const sections = Object.fromEntries(
      block.sections.map((s) => [s.name, s.items.map((i) => i.memory_id)]),
    );
    assert.deepEqual(sections.rules, [rule.memory_id]);
    assert.deepEqual(sections.procedures, [how.memory_id]);
    assert.ok(block.text.includes(rule.memory_id), block.text);
    const json = await cm.context(bank, "restart the pod", {
      format: "json",
      types: ["procedure"],
    });
    assert.equal(json.text, "");
    assert.deepEqual(
      json.sections.flatMap((s) => s.items.map((i) => i.memory_id)),
      [how.memory_id],
    );
  });

  test("answer without a chat model is NotConfiguredError (a ConflictError, 409)", async () => {
    await assert.rejects(cm.answer(freshBank(), "how do I restart?"), (error: unknown) => {
      assert.ok(error instanceof NotConfiguredError && error instanceof ConflictError);
      assert.equal(error.status, 409);
      return true;
    });
  });
});

describe("errors are the API's, as classes", () => {
  test("a bad bank id is refused before anything is sent, naming the field", async () => {
    const refused = new MemoryClient({ baseUrl: "http://127.0.0.1:9", retries: 0 });
    await assert.rejects(refused.recall("../etc", "x"), (error: unknown) => {
      assert.ok(error instanceof InvalidInputError);
      assert.equal(error.problems[0]?.field, "bank_id");
      return true;
    });
    await assert.rejects(refused.retainProcedure("ok", []), /steps: must have at least one step/);
  });

  test("a field the schema refuses is refused before sending, naming it", async () => {
    const nowhere = new MemoryClient({ baseUrl: "http://127.0.0.1:9", retries: 0 });
    await assert.rejects(nowhere.recall("jane", "x", { k: 0 }), (error: unknown) => {
      assert.ok(error instanceof InvalidInputError && error.status === undefined);
      assert.deepEqual(error.problems, [{ field: "k", rule: "must be at least 1" }]);
      return true;
    });
  });

  test("a field only the server can judge comes back as InvalidInputError naming it", async () => {
    await assert.rejects(
      cm.recall(freshBank(), "x", { since: "last tuesday" }),
      (error: unknown) => {
        assert.ok(error instanceof InvalidInputError);
        assert.equal(error.status, 422);
        assert.equal(error.type, "invalid_input");
        assert.ok(
          error.problems.some((p) => p.field === "since"),
          JSON.stringify(error.problems),
        );
        return true;
      },
    );
  });

  test("no key is AuthenticationError; another bank's key is PermissionDeniedError", async () => {
    const anonymous = new MemoryClient({ baseUrl: server.url });
    await assert.rejects(anonymous.recall(ALICE, "x"), AuthenticationError);
    const wrong = new MemoryClient({ baseUrl: server.url, apiKey: "not-a-key-0123456789" });
    await assert.rejects(wrong.recall(ALICE, "x"), (error: unknown) => {
      assert.ok(error instanceof AuthenticationError && error.status === 401);
      assert.ok(
        !error.message.includes("not-a-key-0123456789"),
        "the key never shows in a message",
      );
      return true;
    });
    const alice = new MemoryClient({ baseUrl: server.url, apiKey: ALICE_KEY });
    await alice.retain(ALICE, "Alice's own memory.", { wait: true });
    await assert.rejects(alice.recall("bob-ts", "x"), PermissionDeniedError);
    assert.ok(!String(alice).includes(ALICE_KEY));
  });

  test("supersedes naming no procedure is NotFoundError", async () => {
    await assert.rejects(
      cm.retainProcedure(freshBank(), ["step"], { supersedes: "nothing-here", wait: true }),
      (error: unknown) =>
        error instanceof NotFoundError && error instanceof CogsubError && error.status === 404,
    );
  });
});

describe("the committed OpenAPI document", () => {
  test("is the one the running server publishes", async () => {
    const served = await (await fetch(`${server.url}/openapi.json`)).json();
    const committed = JSON.parse(readFileSync(join(PACKAGE_DIR, "openapi.json"), "utf8"));
    assert.deepEqual(
      committed,
      served,
      "openapi.json drifted from the API: run `npm run openapi && npm run generate` in clients/typescript",
    );
  });
});
