//jetcheck:feature consume-closed

// ConsumeContext.Closed(): how the driver sees the client end a consumption by itself (a `terminal` event).

package main

import "github.com/nats-io/nats.go/jetstream"

func init() { closedOf = func(cc jetstream.ConsumeContext) <-chan struct{} { return cc.Closed() } }
