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

	"github.com/nats-io/nats.go/jetstream"
)

const objectStoreTimeout = 30 * 1e9 // 30 s, as a time.Duration

func init() {
	implementedOps = append(implementedOps, "obj_create", "obj_put", "obj_get", "obj_info", "obj_list", "obj_delete")
}

type objectRequest struct {
	Bucket      string  `json:"bucket"`
	Name        string  `json:"name"`
	DataB64     string  `json:"data_b64"`
	ChunkSize   *uint32 `json:"chunk_size"`
	ShowDeleted bool    `json:"show_deleted"`
}

// notFound keeps the client's own not-found error under the protocol's kind.
func notFound(err error) error {
	if errors.Is(err, jetstream.ErrObjectNotFound) || errors.Is(err, jetstream.ErrBucketNotFound) ||
		errors.Is(err, jetstream.ErrStreamNotFound) {
		return &apiFailure{Kind: "not_found", Message: describeObject(err)}
	}
	return err
}

func describeObject(err error) string {
	switch {
	case errors.Is(err, jetstream.ErrObjectNotFound):
		return "jetstream.ErrObjectNotFound: " + err.Error()
	case errors.Is(err, jetstream.ErrBucketNotFound):
		return "jetstream.ErrBucketNotFound: " + err.Error()
	}
	return describe(err)
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
		return nil, notFound(err)
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
			return nil, notFound(err)
		}
		defer result.Close()
		data, err := io.ReadAll(result)
		if err != nil {
			return nil, notFound(err)
		}
		return map[string]any{"data_b64": base64.StdEncoding.EncodeToString(data)}, nil
	case "obj_info":
		var opts []jetstream.GetObjectInfoOpt
		if args.ShowDeleted {
			opts = append(opts, jetstream.GetObjectInfoShowDeleted())
		}
		info, err := store.GetInfo(ctx, args.Name, opts...)
		if err != nil {
			return nil, notFound(err)
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
		return nil, notFound(store.Delete(ctx, args.Name))
	}
	return nil, failure("unsupported", "op %q is not implemented by the nats.go driver", req.Op)
}

func isObjectOp(op string) bool { return strings.HasPrefix(op, "obj_") }
