package thread

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomthreads/loom/thread/store"
)

// The attributes of the spans of a DB (see Options.TracerProvider).
const (
	// AttrStore names the store: the package of its type ("sqlite",
	// "postgres", "redis", "jsonfile", "memory" for MemoryStore).
	AttrStore = attribute.Key("loom.store")
	// AttrThread is the thread's id.
	AttrThread = attribute.Key("loom.thread.id")
	// AttrTenant is the DB's tenant, when it is not the default.
	AttrTenant = attribute.Key("loom.tenant")
	// AttrOp is what a commit span's commit does: "append", "state", …
	AttrOp = attribute.Key("loom.thread.op")
)

// tracerName names the instrumentation scope of a DB's spans.
const tracerName = "github.com/loomthreads/loom/thread"

// tracer makes a DB's spans; a pointer keeps the DB (copied by WithTenant
// for every request of a server) small.
type tracer struct {
	trace.Tracer
	store string
}

// storeName names a store for its spans: the last element of its type's
// package path, "memory" for this package's MemoryStore.
func storeName(s store.Store) string {
	if s == nil {
		return ""
	}
	// "*sqlite.Store": the package's name and the type's.
	pkg, name, _ := strings.Cut(strings.TrimLeft(fmt.Sprintf("%T", s), "*"), ".")
	if pkg == "thread" {
		return strings.ToLower(strings.TrimSuffix(name, "Store"))
	}
	return pkg
}

// startSpan starts the span "thread.<op>" of an operation on the thread id
// ("" for none). Without a tracer it returns ctx and a nil span, and costs
// nothing.
func (db *DB) startSpan(ctx context.Context, op, id string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if db.tracer == nil {
		return ctx, nil
	}
	kv := make([]attribute.KeyValue, 0, 3+len(attrs))
	kv = append(kv, AttrStore.String(db.tracer.store))
	if id != "" {
		kv = append(kv, AttrThread.String(id))
	}
	if db.tenant != "" {
		kv = append(kv, AttrTenant.String(db.tenant))
	}
	kv = append(kv, attrs...)
	return db.tracer.Start(ctx, "thread."+op, trace.WithAttributes(kv...))
}

// endSpan ends span (nil is none), recording *err when it is not nil.
func endSpan(span trace.Span, err *error) {
	if span == nil {
		return
	}
	if *err != nil {
		span.RecordError(*err)
		span.SetStatus(codes.Error, (*err).Error())
	}
	span.End()
}
