//jetcheck:feature object-store
//jetcheck:ops obj_create obj_put obj_get obj_info obj_list obj_delete obj_update_meta obj_add_link obj_seal obj_status

// Object store ops (protocol v2, ../PROTOCOL.md "v2: object store") over jetstream.ObjectStore: obj_create,
// obj_put, obj_get, obj_info, obj_list, obj_delete. Arguments arrive under "obj"; infos leave as the client's
// ObjectInfo, whose JSON is ADR-20's.

package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const objectStoreTimeout = 30 * 1e9 // 30 s, as a time.Duration

func init() {
	handles((*driver).objectStore, "obj_create", "obj_put", "obj_get", "obj_info", "obj_list", "obj_delete",
		"obj_update_meta", "obj_add_link", "obj_seal", "obj_status")
}

type objectRequest struct {
	Bucket      string  `json:"bucket"`
	Name        string  `json:"name"`
	DataB64     string  `json:"data_b64"`
	ChunkSize   *uint32 `json:"chunk_size"`
	ShowDeleted bool    `json:"show_deleted"`
	Target      string  `json:"target"`
	Meta        *struct {
		Name        string              `json:"name"`
		Description string              `json:"description"`
		Headers     map[string][]string `json:"headers"`
	} `json:"meta"`
}

// objectError keeps the client's own not-found (and already-exists, digest-mismatch) errors under the protocol's kinds.
func objectError(err error) error {
	switch {
	case errors.Is(err, jetstream.ErrObjectNotFound), errors.Is(err, jetstream.ErrBucketNotFound),
		errors.Is(err, jetstream.ErrStreamNotFound):
		return &apiFailure{Kind: "not_found", Message: describe(err, objectErrors...)}
	case errors.Is(err, jetstream.ErrObjectAlreadyExists):
		return &apiFailure{Kind: "exists", Message: "jetstream.ErrObjectAlreadyExists: " + err.Error()}
	case errors.Is(err, jetstream.ErrDigestMismatch):
		return &apiFailure{Kind: "digest_mismatch", Message: "jetstream.ErrDigestMismatch: " + err.Error()}
	}
	return err
}

// objectErrors name the client's not-found errors of the object store.
var objectErrors = []namedError{
	{"jetstream.ErrObjectNotFound", jetstream.ErrObjectNotFound},
	{"jetstream.ErrBucketNotFound", jetstream.ErrBucketNotFound},
}

func (d *driver) objectStore(req *request) (any, error) {
	s, err := d.session(req.Session)
	if err != nil {
		return nil, err
	}
	var args objectRequest
	if len(req.Obj) == 0 || json.Unmarshal(req.Obj, &args) != nil || args.Bucket == "" {
		return nil, failure("invalid", "%s needs \"obj\" with a \"bucket\"", req.Op)
	}
	ctx, cancel := context.WithTimeout(context.Background(), objectStoreTimeout)
	defer cancel()
	if req.Op == "obj_create" {
		_, err := s.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: args.Bucket})
		return nil, err
	}
	store, err := s.js.ObjectStore(ctx, args.Bucket)
	if err != nil {
		return nil, objectError(err)
	}
	switch req.Op {
	case "obj_put":
		data, err := base64.StdEncoding.DecodeString(args.DataB64)
		if err != nil {
			return nil, failure("invalid", "obj_put: data_b64: %v", err)
		}
		meta := jetstream.ObjectMeta{Name: args.Name}
		if args.ChunkSize != nil {
			meta.Opts = &jetstream.ObjectMetaOptions{ChunkSize: *args.ChunkSize}
		}
		info, err := store.Put(ctx, meta, bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		return map[string]any{"info": info}, nil
	case "obj_get":
		result, err := store.Get(ctx, args.Name)
		if err != nil {
			return nil, objectError(err)
		}
		defer result.Close()
		data, err := io.ReadAll(result)
		if err != nil {
			return nil, objectError(err)
		}
		return map[string]any{"data_b64": base64.StdEncoding.EncodeToString(data)}, nil
	case "obj_info":
		var opts []jetstream.GetObjectInfoOpt
		if args.ShowDeleted {
			opts = append(opts, jetstream.GetObjectInfoShowDeleted())
		}
		info, err := store.GetInfo(ctx, args.Name, opts...)
		if err != nil {
			return nil, objectError(err)
		}
		return map[string]any{"info": info}, nil
	case "obj_list":
		infos, err := store.List(ctx)
		if errors.Is(err, jetstream.ErrNoObjectsFound) {
			infos, err = nil, nil
		}
		if err != nil {
			return nil, err
		}
		if infos == nil {
			infos = []*jetstream.ObjectInfo{}
		}
		return map[string]any{"infos": infos}, nil
	case "obj_delete":
		return nil, objectError(store.Delete(ctx, args.Name))
	case "obj_update_meta":
		if args.Meta == nil {
			return nil, failure("invalid", "obj_update_meta needs \"meta\"")
		}
		meta := jetstream.ObjectMeta{Name: args.Meta.Name, Description: args.Meta.Description}
		if len(args.Meta.Headers) > 0 {
			meta.Headers = nats.Header(args.Meta.Headers)
		}
		return nil, objectError(store.UpdateMeta(ctx, args.Name, meta))
	case "obj_add_link":
		// AddLink takes the target's info: read as the client reads it, a deleted one included.
		target, err := store.GetInfo(ctx, args.Target, jetstream.GetObjectInfoShowDeleted())
		if err != nil {
			return nil, objectError(err)
		}
		info, err := store.AddLink(ctx, args.Name, target)
		if err != nil {
			return nil, objectError(err)
		}
		return map[string]any{"info": info}, nil
	case "obj_seal":
		if d.mode("seal-ignored") { // misbehave: answers as sealed without asking the client to seal
			return nil, nil
		}
		return nil, store.Seal(ctx)
	case "obj_status":
		status, err := store.Status(ctx)
		if err != nil {
			return nil, objectError(err)
		}
		return map[string]any{"status": objectStatusJSON(status, d.mode("status-misreport"))}, nil
	}
	return nil, failure("unsupported", "op %q is not implemented by the nats.go driver", req.Op)
}

// objectStatusJSON is ObjectStoreStatus as the protocol's obj_status answer (ADR-20's fields); `misreport` (a misbehave
// mode) reports size 0 and no backing store.
func objectStatusJSON(status jetstream.ObjectStoreStatus, misreport bool) map[string]any {
	size, backing := any(status.Size()), any(status.BackingStore())
	if misreport {
		size, backing = 0, ""
	}
	return map[string]any{
		"bucket":        status.Bucket(),
		"description":   status.Description(),
		"ttl_s":         status.TTL().Seconds(),
		"storage":       strings.ToLower(status.Storage().String()),
		"replicas":      status.Replicas(),
		"sealed":        status.Sealed(),
		"size":          size,
		"backing_store": backing,
		"metadata":      status.Metadata(),
		"compressed":    status.IsCompressed(),
	}
}
