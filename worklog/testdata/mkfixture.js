// Writes the fixtures of file_test.go the way the seed's code does
// (saveThreadsFile: fs.writeFileSync(path, JSON.stringify(threads, null,
// 2)), no newline at the end):
//
//	node mkfixture.js threads.json threads.resolved.json
const fs = require("fs");
const threads = [
  { id: "t-05a7ecb6", text: "Phase 2 GitMem public npm release still pending", status: "open",
    created_at: "2026-02-09T18:12:01.097Z", source_session: "c2d841be-fff2-4ac9-ae1e-4d604e2e4d69" },
  { id: "t-1b2c3d4e", text: "Flaky integration test in CI", status: "open",
    created_at: "2026-02-10T09:00:00.000Z", source_session: "c2d841be-fff2-4ac9-ae1e-4d604e2e4d69" },
  { id: "t-9f8e7d6c", text: "Decide on the cache eviction policy", status: "open",
    created_at: "2026-02-11T10:30:15.250Z" },
  { id: "t-a1b2c3d4", text: "Quotes \"inside\", a tab\tand a newline\n, <b>html</b> & ampersand, “curly”, emoji 🚀, line separator \u2028 end",
    status: "open", created_at: "2026-02-12T08:00:00.001Z", source_session: "5d6e7f80-1111-4222-8333-944455556666",
    last_touched_at: "2026-02-13T08:00:00.000Z", tags: ["ci", { level: 2 }], empty: [] },
];
// resolved as the seed's resolveThread does: fields set on the object read
const t = { id: "t-77aa88bb", text: "Upgrade the SDK to v2", status: "open",
  created_at: "2026-02-08T12:00:00.000Z", source_session: "c2d841be-fff2-4ac9-ae1e-4d604e2e4d69" };
t.status = "resolved";
t.resolved_at = "2026-02-09T17:45:30.500Z";
t.resolved_by_session = "c2d841be-fff2-4ac9-ae1e-4d604e2e4d69";
t.resolution_note = "Done in PR #42";
threads.splice(1, 0, t);
fs.writeFileSync(process.argv[2], JSON.stringify(threads, null, 2));
// The same file after two resolutions, as the seed's resolveThread makes
// them (status, resolved_at, then the session and the note, set on the
// object that was read), at the time and in the session
// TestFixtureResolve uses.
if (process.argv[3]) {
  for (const id of ["t-1b2c3d4e", "t-a1b2c3d4"]) {
    const th = threads.find((x) => x.id === id);
    th.status = "resolved";
    th.resolved_at = "2026-03-01T12:00:00.000Z";
    th.resolved_by_session = "0b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9";
    th.resolution_note = "fixed in " + id;
  }
  fs.writeFileSync(process.argv[3], JSON.stringify(threads, null, 2));
}
