//jetcheck:feature connection-errors

// The jetstream package's own errors for a lost connection or server, where the release has them.

package main

import "github.com/nats-io/nats.go/jetstream"

func init() {
	connectionErrors = append(connectionErrors, jetstream.ErrConnectionClosed)
	sentinels = append(sentinels,
		namedError{"jetstream.ErrServerShutdown", jetstream.ErrServerShutdown},
		namedError{"jetstream.ErrConnectionClosed", jetstream.ErrConnectionClosed})
}
