// Package freeport picks a TCP port on 127.0.0.1 for a process that has to
// be told its address before it starts: a PostgreSQL cluster (pg_ctl's
// -p), or the lab's server, whose address the sandbox PSP must know for
// its webhooks before the server can start (it needs the PSP's).
//
// Listening on port 0 and closing the listener, the usual way, hands back
// a port from the kernel's ephemeral range, which the kernel hands out
// again to the next port-0 listener or outgoing connection of any process
// on the machine (every PostgreSQL connection a parallel test opens takes
// one): a CI run on 2026-12-06 failed so, the lab's server refused with
// "bind: address already in use" on a port picked a moment before. Pick
// draws from below the ephemeral range instead (net.ipv4.ip_local_port_range,
// read from /proc), where only a process naming the port itself can bind:
// the check that nothing listens there now leaves only another picker
// drawing the same port of some twenty thousand in the same moment. Where
// the range leaves no room below it, Pick falls back to port 0.
//
// A leaf: it imports the standard library only.
package freeport
