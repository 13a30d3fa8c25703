// Package dbpool makes the pgx pools retrysafe's statements are written
// for: ParseConfig and Open from a database URL, and Configure for a
// pgxpool.Config an application builds itself (its tracer, TLS, sizes and
// hooks kept). retrysafe's commands, tests and benchmark open their pools
// with it, and an application that embeds the executor, the webhook
// receiver or the agent should too: a pool from plain pgxpool.New works
// until the database's defaults differ from what those statements assume
// (below), and then fails with serialization errors or stores text
// mangled. It is in the adapters layer: it imports pgx and migrations
// (for the schema name's rule) and nothing else of the module.
//
// # The start of a session
//
// Every connection a pool opens runs one statement before it is handed
// out (pgxpool's AfterConnect), which makes the session what retrysafe's
// statements assume whatever the database's or role's defaults say:
//
//   - search_path on the schema, then public. Set by that statement, not
//     sent as a startup parameter, which PgBouncer refuses unless told to
//     track it; in PgBouncer's session pooling a client keeps its server
//     session, so it holds (transaction pooling is not supported: nothing
//     a session sets holds there). RESET ALL or DISCARD ALL would undo it,
//     so code that changes a setting on these connections puts the old
//     value back instead.
//   - synchronous_commit on when it starts off (what a crash must not lose
//     is written on these connections: River's job completions, turns,
//     replies), any other value left alone.
//   - read committed when the default isolation is another: the statements
//     are written for a snapshot each.
//   - a refusal (ErrEncoding) when the database is not UTF8: on LATIN1,
//     jsonb sent in binary was stored unconverted, silently.
//   - one 1 MB block allocated and freed by the backend (allocatorWarmup),
//     which on a glibc server raises that backend's malloc thresholds for
//     its life: a statement whose memory adds up past 128 kB then keeps
//     the heap for the next one instead of shrinking it (brk) and faulting
//     it in again. Nothing is set; the server's allocator is what changes.
//
// One round trip in all, as the synchronous_commit check alone took.
// Configure keeps an AfterConnect the application had set and runs it
// after that statement, on the session as configured.
//
// # TLS
//
// The TLS configuration pgx parses from the URL is left as it is: pgx reads
// sslcert and sslkey again at every handshake only while TLSConfig is its
// own, so a client certificate renewed over those files reaches the next
// connection without a restart.
package dbpool
