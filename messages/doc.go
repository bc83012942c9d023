// Package messages holds Switchboard's plain data: the message record and its
// states, the documents exchanged with frontends and peers, and the messages
// actors send each other. It has no behaviour beyond validation helpers and
// imports nothing of ours, so every other package can share it.
package messages
