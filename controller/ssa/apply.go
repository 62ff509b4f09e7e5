// Package ssa is the operator's one write: a complete apply configuration sent with Server-Side Apply under one
// field manager, and only when what that manager owns differs from it (Ensure, with what it remembers of its own
// sends behind the Memory interface, so a steady state costs no write even after a restart); a create that never
// takes over what exists; the release of a child to nobody (Release, and RemoveGuarded for the one thing an apply
// cannot do); the fields an apply lets go of that other managers keep (RetainedFields); the owner key the cache
// shares between children (SharedOwnerKey, OwnerKeyClient); and the write's metrics. The reconciler decides what
// to send; this package decides whether and how.
package ssa

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/desired"
)

// Object is every kind the operator writes: a pointer to an API struct.
type Object[T any] interface {
	*T
	client.Object
}

// Error is the failure to write one object: the API server's error, or the reason an object of that name
// is not ours to take over.
type Error struct {
	Kind          string
	Key           types.NamespacedName
	Err           error
	NotOursReason string
	Read          bool // the object, or an input of it, could not be read: its state is unknown
}

func (e *Error) Error() string {
	if e.NotOursReason != "" {
		return fmt.Sprintf("%s %s already exists and %s; the WebApp will not take it over (delete or rename it)", e.Kind, e.Key, e.NotOursReason)
	}
	if e.Read {
		return fmt.Sprintf("reading %s %s: %v", e.Kind, e.Key, e.Err)
	}
	return fmt.Sprintf("applying %s %s: %v", e.Kind, e.Key, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// NotOurs says the object in the way is another's: the WebApp will not take it over (status's writeError).
func (e *Error) NotOurs() bool { return e.NotOursReason != "" }

// ReadFailed says the object, or an input of it, could not be read: its state is unknown (status's writeError).
func (e *Error) ReadFailed() bool { return e.Read }

// Waiting reports whether only a change can fix the failure (the object in the way, or a spec the server refuses
// as invalid or an admission policy denies): retrying the same write soon cannot succeed.
func (e *Error) Waiting() bool {
	return e.NotOursReason != "" || apierrors.IsInvalid(e.Err) || apierrors.IsBadRequest(e.Err)
}

// createOnlyVersion is the resourceVersion of a create-only apply: etcd's first revision, which no stored object
// has (an empty store is at revision 1, and the first write makes it 2).
const createOnlyVersion = "1"

// errExists is a create-only apply's refusal: an object of that name exists.
var errExists = errors.New("the object exists")

// ErrOwnerGoing stops a reconcile that would re-create a child of a WebApp the API server says is being deleted,
// or gone: the deletion's own reconcile follows.
var ErrOwnerGoing = errors.New("the WebApp is being deleted")

// Writer is the one write: Server-Side Apply under one field manager, decided by what that manager owns. client
// reads through the cache and writes; reader reads from the API server where the cache cannot be trusted; mem is
// what it remembers of its own sends; types knows the children's schemas (to tell which fields an apply lets go of).
type Writer struct {
	Client client.Client
	Reader client.Reader
	Mem    Memory
	Types  managedfields.TypeConverter
}

// Memory is what the write remembers of its own sends and refusals, by the WebApp's key and the written kind
// (the reconciler's memory keeps it): whether an object was seen, whether the cache is behind our last write to it,
// what was sent to it last and what the server refused.
type Memory interface {
	Known(kind string, key types.NamespacedName) bool
	Behind(kind string, key types.NamespacedName, obj client.Object) bool
	Had(kind string, key types.NamespacedName) bool
	SentMatches(kind string, key types.NamespacedName, obj client.Object, sum [sha256.Size]byte) bool
	Remember(kind string, key types.NamespacedName, obj client.Object, sum [sha256.Size]byte)
	Refusal(kind string, key types.NamespacedName, obj client.Object, want any) error
	Refused(kind string, key types.NamespacedName, obj client.Object, sum [sha256.Size]byte, err error)
	ForgetSent(key types.NamespacedName)
}

// ownerAlive returns ErrOwnerGoing unless the WebApp of key, as the API server has it, is owner and not being
// deleted.
func ownerAlive(ctx context.Context, w *Writer, key types.NamespacedName, owner types.UID) error {
	app := &webappv2.WebApp{}
	switch err := w.Reader.Get(ctx, key, app); {
	case apierrors.IsNotFound(err):
		return ErrOwnerGoing
	case err != nil:
		return &Error{Kind: "WebApp", Key: key, Err: err, Read: true}
	case app.UID != owner || app.DeletionTimestamp != nil:
		return ErrOwnerGoing
	}
	return nil
}

// Opts are the parts of a write that do not depend on the object's kind.
type Opts struct {
	createOnly   bool          // refuse the apply (errExists) rather than change an existing object
	Owner        metav1.Object // a child's WebApp: an object controlled by anything else is never taken over (nil for the WebApp itself)
	OnlyIfExists bool          // never create the object (the WebApp itself)
	ReadFirst    bool          // read a cache miss from the API server before trying to create it (a child known not to be ours)
	Status       bool          // write the status subresource
	// beforeApply runs just before an apply to an existing object is sent, with the object the decision was made
	// on, and reports whether it wrote (nil: nothing to do). It gives fields the apply is about to leave out to
	// their next owner.
	BeforeApply func(ctx context.Context, cur client.Object) (bool, error)
	// name is the object's name when it is not the WebApp's (a variant of a child kind, such as the canary's
	// Deployment); the memory stays the WebApp's.
	Name string
}

// ObjectKey is the key of the object written for the WebApp of key.
func (o Opts) ObjectKey(key types.NamespacedName) types.NamespacedName {
	if o.Name != "" {
		key.Name = o.Name
	}
	return key
}

// kindOf is the API kind of a child's id ("Deployment/canary": Deployment).
func kindOf(id string) string {
	kind, _, _ := strings.Cut(id, "/")
	return kind
}

// Outcome is what Ensure found and did.
type Outcome[PT client.Object] struct {
	Obj    PT // the object as it is now; nil when it does not exist or could not be read
	Before PT // the object before any write; nil when it did not exist
	// existed: the object existed before; sent: an apply was sent.
	Existed, Sent bool
	// changed: the server changed the object (created it, or its resourceVersion moved).
	Changed bool
	// retained: fields our apply let go of that other field managers keep (children only).
	Retained []webappv2.RetainedField
	// HandedOver: BeforeApply wrote.
	HandedOver bool
}

// Written is what a write did, for the events and metrics.
type Written struct {
	Existed, Sent, Changed bool
	Deleted                bool // the object was deleted (an optional child the WebApp no longer needs)
	Replaced               bool // the deletion replaces it (hooks.replaced): created again by the next reconcile
	ConfigChanged          bool // the config hash the object carries changed
	HandedOver             bool // fields were handed to their next owner before the apply (the count, to the HPA)
}

// Written is what the outcome says of the write, for the events and metrics.
func (o Outcome[PT]) Written() Written {
	return Written{Existed: o.Existed, Sent: o.Sent, Changed: o.Changed, HandedOver: o.HandedOver}
}

// Ensure is the one write decision, for children, finalizer and status: it applies desired(current), forced, unless
// what our manager owns already says the same. A missing object is only ever created by a create-only apply
// (refused if the object exists), and a cache that has not yet seen our own last write of the object is not judged
// by at all (the API server is read instead), so a stale cache costs a read, never a write or a write missed, and an
// object that is not ours is never taken over, not even one created between our read and our write.
func Ensure[T any, PT Object[T], AC runtime.ApplyConfiguration](ctx context.Context, w *Writer, kind string, key types.NamespacedName,
	desired func(current PT) AC, extract func(PT, string) (AC, error), o Opts) (Outcome[PT], error) {
	cur := PT(new(T))
	err := w.Client.Get(ctx, o.ObjectKey(key), cur)
	if apierrors.IsNotFound(err) && (o.OnlyIfExists || o.ReadFirst || w.Mem.Known(kind, key)) {
		// Deleted, not yet in the cache, or without our label: only the API server knows. (A child never seen is
		// most likely missing: the create-only apply below asks the server without a read first.)
		err = w.Reader.Get(ctx, o.ObjectKey(key), cur)
	}
	switch {
	case apierrors.IsNotFound(err) && o.OnlyIfExists:
		return Outcome[PT]{}, nil
	case apierrors.IsNotFound(err):
		if res, found, err := create(ctx, w, kind, key, desired, o, cur); !found {
			return res, err
		}
	case err != nil:
		return Outcome[PT]{}, &Error{Kind: kindOf(kind), Key: o.ObjectKey(key), Err: err, Read: true}
	}
	res := Outcome[PT]{Obj: cur, Before: cur, Existed: true}
	if w.Mem.Behind(kind, key, cur) {
		// The cache has not yet seen our own last write: it cannot say what we own now, whether it differs from
		// desired or matches it (desired may have come back to what the cache still shows, after our last write
		// changed it). Ask the server. (A cache that has seen it is trusted: a difference there is one on the
		// server, or was a moment ago.)
		fresh := PT(new(T))
		switch err := w.Reader.Get(ctx, o.ObjectKey(key), fresh); {
		case apierrors.IsNotFound(err) && o.OnlyIfExists:
			return Outcome[PT]{}, nil
		case apierrors.IsNotFound(err):
			if res, found, err := create(ctx, w, kind, key, desired, o, fresh); !found {
				return res, err
			}
		case err != nil:
			return res, &Error{Kind: kindOf(kind), Key: o.ObjectKey(key), Err: err, Read: true}
		}
		cur = fresh
		res.Obj, res.Before = fresh, fresh
	}
	want, same, err := decide(ctx, w, kind, key, cur, desired, extract, o)
	if err == nil && !same {
		if refused := w.Mem.Refusal(kind, key, cur, want); refused != nil {
			// The server refused exactly this, and neither it nor the object changed since: asking again cannot help yet.
			return res, refused
		}
	}
	switch {
	case err != nil:
		return res, err
	case same:
		AppliesTotal.WithLabelValues(kindOf(kind), ResultSkipped).Inc()
		return res, nil
	}
	if o.BeforeApply != nil {
		// On the object decided on (the server's when the cache is behind our own write), just before the apply.
		handed, err := o.BeforeApply(ctx, res.Before)
		if err != nil {
			return res, &Error{Kind: kindOf(kind), Key: o.ObjectKey(key), Err: err}
		}
		res.HandedOver = handed
	}
	return send(ctx, w, kind, key, want, o, res)
}

// create sends desired(nil) as a create-only apply. When an object of that name exists after all (without our
// label, or created since), it is read into into and found says so: the caller judges it like any other.
func create[T any, PT Object[T], AC runtime.ApplyConfiguration](ctx context.Context, w *Writer, kind string, key types.NamespacedName,
	desired func(current PT) AC, o Opts, into PT) (res Outcome[PT], found bool, err error) {
	want := desired(nil)
	if refused := w.Mem.Refusal(kind, key, nil, want); refused != nil {
		return Outcome[PT]{}, false, refused
	}
	if o.Owner != nil && w.Mem.Had(kind, key) {
		// A child we had is gone. If the user deleted it with the WebApp (`kubectl delete webapp/web
		// deployment/web`, the cache seeing the child's deletion first), it must stay deleted: ask the server.
		if err := ownerAlive(ctx, w, key, o.Owner.GetUID()); err != nil {
			return Outcome[PT]{}, false, err
		}
	}
	o.createOnly = true
	res, err = send(ctx, w, kind, key, want, o, Outcome[PT]{})
	if !errors.Is(err, errExists) {
		return res, false, err
	}
	if err := w.Reader.Get(ctx, o.ObjectKey(key), into); err != nil {
		// Gone again since the refusal (NotFound), or unreadable: retried.
		return Outcome[PT]{}, false, &Error{Kind: kindOf(kind), Key: o.ObjectKey(key), Err: err, Read: true}
	}
	// Remembered as seen, so the next cache miss reads it rather than trying to create it again.
	w.Mem.Remember(kind, key, into, [sha256.Size]byte{})
	return Outcome[PT]{}, true, nil
}

// decide returns desired(cur) and whether our manager owns exactly that on cur; unreadable fields (a duplicate
// entry another writer left in a list we own) count as different, since an apply repairs them.
func decide[T any, PT Object[T], AC runtime.ApplyConfiguration](ctx context.Context, w *Writer, kind string, key types.NamespacedName,
	cur PT, desired func(PT) AC, extract func(PT, string) (AC, error), o Opts) (AC, bool, error) {
	var want AC
	if o.Owner != nil {
		if why := NotOursReason(cur, o.Owner); why != "" {
			return want, false, &Error{Kind: kindOf(kind), Key: o.ObjectKey(key), NotOursReason: why}
		}
	}
	want = desired(cur)
	sum, err := HashOf(want)
	if err != nil {
		return want, false, err
	}
	if w.Mem.SentMatches(kind, key, cur, sum) {
		return want, true, nil
	}
	owned, err := extract(cur, webappv2.FieldManager)
	if err != nil {
		log.FromContext(ctx).V(1).Info("cannot read the fields we own; applying to repair them", "kind", kind, "error", err.Error())
		return want, false, nil
	}
	same, err := OwnedFieldsMatch[T](want, owned)
	if err != nil {
		return want, false, fmt.Errorf("comparing %s %s: %w", kindOf(kind), o.ObjectKey(key), err)
	}
	if same {
		// Until the object changes, this decision holds: the next resync needs no extraction.
		w.Mem.Remember(kind, key, cur, sum)
	} else if l := log.FromContext(ctx).V(2); l.Enabled() {
		// What differs, for the reader of a no-op apply's report.
		wantJSON, _ := json.Marshal(want)
		ownedJSON, _ := json.Marshal(owned)
		l.Info("what we own differs from desired", "kind", kind, "desired", string(wantJSON), "owned", string(ownedJSON))
	}
	return want, same, nil
}

// send applies want and returns res completed with the object as the server now has it.
func send[T any, PT Object[T], AC runtime.ApplyConfiguration](ctx context.Context, w *Writer, kind string, key types.NamespacedName,
	want AC, o Opts, res Outcome[PT]) (Outcome[PT], error) {
	// Hashed before sending: the client decodes the server's answer into what it sends.
	sum, err := HashOf(want)
	if err != nil {
		return res, err
	}
	// Whether this apply lets go of fields our manager owns: then other managers may keep them (see retained.go).
	letsGo := o.Owner != nil && res.Existed && Releases(w.Types, res.Before, want)
	if o.createOnly {
		// With a resourceVersion that no live object has, the apply can change none: a missing object is created
		// (the server wipes the resourceVersion of an object created by an apply), an existing one refuses it.
		if err := setResourceVersion(want, ptr.To(createOnlyVersion)); err != nil {
			return res, fmt.Errorf("%s %s: %w", kindOf(kind), o.ObjectKey(key), err)
		}
	}
	if res.Existed {
		// The UID of the object we decided on: if it was deleted since (the user's `kubectl delete`), the server
		// refuses the apply rather than create it again, and if it was replaced, rather than change the new one.
		if err := setUID(want, ptr.To(res.Before.GetUID())); err != nil {
			return res, fmt.Errorf("%s %s: %w", kindOf(kind), o.ObjectKey(key), err)
		}
	}
	if o.Status {
		err = w.Client.Status().Apply(ctx, want, client.FieldOwner(webappv2.FieldManager), client.ForceOwnership)
	} else {
		err = w.Client.Apply(ctx, want, client.FieldOwner(webappv2.FieldManager), client.ForceOwnership)
	}
	if err != nil {
		// Refused: want is as it was built (on success the client decoded the object into it).
		_ = setResourceVersion(want, nil)
		_ = setUID(want, nil)
		if o.createOnly && apierrors.IsConflict(err) {
			return res, errExists
		}
	}
	res.Sent = true
	if err != nil {
		AppliesTotal.WithLabelValues(kindOf(kind), ResultFailed).Inc()
		ce := &Error{Kind: kindOf(kind), Key: o.ObjectKey(key), Err: err}
		if ce.Waiting() {
			refusedOn := client.Object(res.Before)
			if res.HandedOver {
				// The handover changed the object: the refusal holds for it as it is now, not as it was decided on.
				if fresh := PT(new(T)); w.Reader.Get(ctx, o.ObjectKey(key), fresh) == nil {
					refusedOn = fresh
				}
			}
			w.Mem.Refused(kind, key, refusedOn, sum, ce)
		}
		return res, ce
	}
	AppliesTotal.WithLabelValues(kindOf(kind), ResultSent).Inc()
	// The client decodes the apply response into want: it is the object as the server now has it.
	applied := PT(new(T))
	if err := desired.RoundTrip(want, applied); err != nil {
		return res, fmt.Errorf("decoding applied %s %s: %w", kindOf(kind), o.ObjectKey(key), err)
	}
	res.Obj = applied
	res.Changed = !res.Existed || res.Before.GetResourceVersion() != applied.GetResourceVersion()
	// An apply that let a deleted object go (its last finalizer removed) answers with the object as it was.
	if !res.Changed && applied.GetDeletionTimestamp() == nil {
		// The server kept the object as it was: our comparison saw a difference the server does not.
		NoopAppliesTotal.WithLabelValues(kindOf(kind)).Inc()
		log.FromContext(ctx).Info("apply changed nothing on the server; not sending it again until the object changes", "kind", kind)
	}
	w.Mem.Remember(kind, key, applied, sum)
	if letsGo {
		// The apply's answer carries no managedFields: who holds what we let go of is read from the server.
		if err := w.Reader.Get(ctx, o.ObjectKey(key), applied); err == nil {
			res.Retained = RetainedFields(kindOf(kind), res.Before, applied)
		}
		log.FromContext(ctx).V(1).Info("let go of fields", "kind", kind, "keptByOtherManagers", len(res.Retained))
	}
	return res, nil
}

// NotOursReason says why obj may not be taken over by the WebApp owner, or "" when it may: it is controlled by that
// WebApp, or by nothing while it carries our managed-by label and the WebApp's name as its instance (a child an
// Orphan deletion released from a WebApp of this name). The instance matters for the names two WebApps can share:
// the canary of "shop" is "shop-canary", which is also the name of a WebApp "shop-canary"'s own children.
func NotOursReason(obj client.Object, owner metav1.Object) string {
	if ref := metav1.GetControllerOf(obj); ref != nil {
		if ref.UID == owner.GetUID() {
			return ""
		}
		return fmt.Sprintf("is controlled by %s %s", ref.Kind, ref.Name)
	}
	labels := obj.GetLabels()
	if labels[webappv2.LabelManagedBy] != webappv2.ManagedBy {
		return "is not managed by " + webappv2.ManagedBy
	}
	switch inst := labels[webappv2.LabelInstance]; inst {
	case owner.GetName():
	case "":
		return "has no " + webappv2.LabelInstance + " label to say which WebApp released it"
	default:
		return fmt.Sprintf("was released by WebApp %q (its %s label), not by this one", inst, webappv2.LabelInstance)
	}
	return ""
}

// OwnedFieldsMatch reports whether wanted says the same as owned, the apply configuration extracted from the
// fields our manager owns. Both go through the typed object T, so both see the same shape: zero values of optional
// fields drop out on both sides and quantities are compared by value ("1000m" == "1").
func OwnedFieldsMatch[T any](wanted, owned any) (bool, error) {
	var want, have T
	if err := desired.RoundTrip(wanted, &want); err != nil {
		return false, err
	}
	if err := desired.RoundTrip(owned, &have); err != nil {
		return false, err
	}
	return equality.Semantic.DeepEqual(want, have), nil
}

// setResourceVersion sets the resourceVersion of the apply configuration ac (nil: none).
func setResourceVersion(ac any, rv *string) error { return setMeta(ac, "ResourceVersion", rv) }

// setUID sets the UID of the apply configuration ac (nil: none).
func setUID(ac any, uid *types.UID) error { return setMeta(ac, "UID", uid) }

// setMeta sets the object metadata field named field of the apply configuration ac to v.
func setMeta[V any](ac any, field string, v *V) error {
	rv := reflect.ValueOf(ac)
	if rv.Kind() == reflect.Pointer && !rv.IsNil() && rv.Elem().Kind() == reflect.Struct {
		if sf, ok := rv.Elem().Type().FieldByName(field); ok && sf.Type == reflect.TypeFor[*V]() {
			// An error, not a panic, when the embedded object metadata is nil.
			if f, err := rv.Elem().FieldByIndexErr(sf.Index); err == nil && f.CanSet() {
				f.Set(reflect.ValueOf(v))
				return nil
			}
		}
	}
	return fmt.Errorf("%T has no %s to set", ac, field)
}

// HashOf is the sum of v's JSON form: what the memory compares a desired state by.
func HashOf(v any) ([sha256.Size]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(data), nil
}

// Release hands a child to nobody by re-applying what our manager owns on it less our owner reference. The apply
// carries the child's UID and resourceVersion: the server refuses it if the child was deleted (it is never
// re-created) or changed since our read. Only ownership changes, so no spec (even one the server refuses) can block
// a deletion. An owner reference that another manager also owns survives that apply (a child applied or created
// from an exported manifest); it is then removed by a guarded patch, so the garbage collector never takes a
// released child. name is the child's (the WebApp's, or a variant's such as the canary's). It reports whether it
// sent anything.
func Release[T any, PT Object[T], AC runtime.ApplyConfiguration](ctx context.Context, w *Writer, kind string, app *webappv2.WebApp,
	name string, extract func(PT, string) (AC, error)) (bool, error) {
	key := types.NamespacedName{Namespace: app.Namespace, Name: name}
	cur := PT(new(T))
	if err := w.Reader.Get(ctx, key, cur); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	i := ownerIndex(cur, app.UID)
	if i < 0 {
		// Already released, or never ours to release.
		return false, nil
	}
	if owned, err := extract(cur, webappv2.FieldManager); err == nil {
		u := &unstructured.Unstructured{}
		if err := desired.RoundTrip(owned, &u.Object); err != nil {
			return false, fmt.Errorf("releasing %s %s: %w", kind, key, err)
		}
		var kept []any
		ownRefs, _, _ := unstructured.NestedSlice(u.Object, "metadata", "ownerReferences")
		for _, ref := range ownRefs {
			if m, ok := ref.(map[string]any); !ok || m["uid"] != string(app.UID) {
				kept = append(kept, ref)
			}
		}
		if err := unstructured.SetNestedSlice(u.Object, kept, "metadata", "ownerReferences"); err != nil {
			return false, err
		}
		// The UID makes the server refuse (a conflict) rather than create a child deleted since our read; the
		// resourceVersion, rather than write back fields someone changed since.
		u.SetUID(cur.GetUID())
		u.SetResourceVersion(cur.GetResourceVersion())
		if err := w.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(webappv2.FieldManager), client.ForceOwnership); err != nil {
			if apierrors.IsConflict(err) && apierrors.IsNotFound(w.Reader.Get(ctx, key, cur)) {
				// Deleted since our read (the UID made the server refuse to create it again): nothing to release.
				return false, nil
			}
			return true, err
		}
		// Did our owner reference go? Only if no other manager owns it too: the server says, not the apply's answer
		// (it has no managedFields, and our reference may be all that another manager still holds).
		if err := w.Reader.Get(ctx, key, cur); err != nil {
			return true, client.IgnoreNotFound(err)
		}
		if i = ownerIndex(cur, app.UID); i < 0 {
			w.Mem.ForgetSent(client.ObjectKeyFromObject(app))
			return true, nil
		}
	}
	// What we own cannot be read, or another manager keeps our reference: remove exactly the entry we saw.
	err := RemoveGuarded(ctx, w.Client, cur, "/metadata/ownerReferences", cur.GetOwnerReferences(), i)
	if err == nil {
		w.Mem.ForgetSent(client.ObjectKeyFromObject(app))
	}
	return true, err
}

// ownerIndex is the index of the owner reference to uid in obj's, or -1.
func ownerIndex(obj client.Object, uid types.UID) int {
	return slices.IndexFunc(obj.GetOwnerReferences(), func(ref metav1.OwnerReference) bool { return ref.UID == uid })
}

// RemoveGuarded removes list[i] at path with a JSON patch that first tests the whole list, for the one thing
// Server-Side Apply cannot do: take an entry away from another field manager that also owns it.
func RemoveGuarded[E any](ctx context.Context, c client.Client, obj client.Object, path string, list []E, i int) error {
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": path, "value": list},
		{"op": "remove", "path": fmt.Sprintf("%s/%d", path, i)},
	})
	if err != nil {
		return err
	}
	return client.IgnoreNotFound(c.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, patch)))
}
