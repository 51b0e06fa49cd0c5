//jetcheck:feature priority-groups
//jetcheck:ops js_group_fetch

// js_group_fetch: Consumer.Fetch with FetchPriorityGroup (ADR-42) on one consumer handle per session, stream and
// consumer, as an application keeps it, so the client's pin id carries from one pull to the next.

package main

import (
	"context"
	"fmt"
	"log"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

func init() {
	handles(feature((*driver).groupFetch), "js_group_fetch")
	sentinels = append(sentinels, namedError{"jetstream.ErrPinIDMismatch", jetstream.ErrPinIDMismatch})
}

var (
	consumerHandlesMu sync.Mutex
	consumerHandles   = map[string]jetstream.Consumer{} // session/stream/consumer -> the handle its pulls go through
)

func (d *driver) groupFetch(ctx context.Context, s *session, args featureRequest) (any, error) {
	if args.Group == "" || args.Batch <= 0 || args.ExpiresS <= 0 {
		return nil, failure("invalid", "js_group_fetch needs group, batch and expires_s")
	}
	key := strings.Join([]string{s.id, args.Stream, args.Consumer}, "\x00")
	consumerHandlesMu.Lock()
	cons, kept := consumerHandles[key]
	consumerHandlesMu.Unlock()
	if !kept || d.mode("pin-forgotten") {
		var err error
		if cons, err = s.js.Consumer(ctx, args.Stream, args.Consumer); err != nil {
			return nil, err
		}
		consumerHandlesMu.Lock()
		consumerHandles[key] = cons
		consumerHandlesMu.Unlock()
	}
	opts := []jetstream.FetchOpt{jetstream.FetchMaxWait(seconds(args.ExpiresS)), jetstream.FetchPriorityGroup(args.Group)}
	if args.MinPending != nil && !d.mode("min-pending-dropped") {
		opts = append(opts, jetstream.FetchMinPending(*args.MinPending))
	}
	batch, err := cons.Fetch(args.Batch, opts...)
	if err != nil {
		return nil, err
	}
	deliveries := []map[string]any{}
	for msg := range batch.Messages() {
		meta, err := msg.Metadata()
		if err != nil {
			log.Printf("js_group_fetch: a message without JetStream metadata: %v", err)
			continue
		}
		deliveries = append(deliveries, map[string]any{
			"stream_seq": meta.Sequence.Stream, "pin_id": msg.Headers().Get("Nats-Pin-Id"),
		})
		if err := msg.Ack(); err != nil {
			log.Printf("js_group_fetch: ack failed: %v", err)
		}
	}
	ending := ""
	if batchErr := batch.Error(); batchErr != nil {
		ending = describe(batchErr, namedError{"jetstream.ErrPinIDMismatch", jetstream.ErrPinIDMismatch})
	} else if len(deliveries) < args.Batch {
		ending = fmt.Sprintf("MessageBatch.Error() = nil after %d of %d messages", len(deliveries), args.Batch)
	}
	return map[string]any{"deliveries": deliveries, "error": ending}, nil
}
