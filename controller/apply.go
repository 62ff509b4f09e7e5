package controller

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// childError is the failure to apply one child object; it names the object and keeps the API server's error.
type childError struct {
	kind string
	key  types.NamespacedName
	err  error
}

func (e *childError) Error() string {
	return fmt.Sprintf("applying %s %s: %v", e.kind, e.key, e.err)
}

func (e *childError) Unwrap() error { return e.err }

// refused reports whether the server refused the object itself (invalid, malformed, or denied by an admission
// policy, which also answers Invalid): retrying the same apply soon cannot succeed.
func (e *childError) refused() bool {
	return apierrors.IsInvalid(e.err) || apierrors.IsBadRequest(e.err)
}

// ownedFieldsMatch reports whether desired says the same as owned, the apply configuration extracted from the
// fields our manager owns in the cached object. Both go through the typed object T, so both see the same shape:
// zero values of optional fields drop out on both sides and quantities are compared by value ("1000m" == "1").
func ownedFieldsMatch[T any](desired, owned any) (bool, error) {
	var want, have T
	if err := roundTrip(desired, &want); err != nil {
		return false, err
	}
	if err := roundTrip(owned, &have); err != nil {
		return false, err
	}
	return equality.Semantic.DeepEqual(want, have), nil
}

// roundTrip decodes the JSON form of in into out.
func roundTrip(in, out any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

// child is one object the operator applies: its desired apply configuration and the object in the cache.
type child[T any, PT interface {
	*T
	client.Object
}, AC runtime.ApplyConfiguration] struct {
	kind    string
	desired AC
	// extract is client-go's or our generated Extract… function for the kind.
	extract func(PT, string) (AC, error)
	// owner is the UID of the WebApp: an existing object controlled by anything else is never taken over.
	owner types.UID
	// onlyIfExists skips the apply when the object does not exist (releasing a child must not create it).
	onlyIfExists bool
}

// outcome is what ensure found and did.
type outcome[PT client.Object] struct {
	obj     PT   // the object as it is now; nil when it does not exist
	before  PT   // the object as it was before any apply; nil when it did not exist
	existed bool // it existed before
	sent    bool // an apply request was sent
}

// notOursError says an object of the child's name exists that this WebApp does not control, so it is left alone.
type notOursError struct {
	kind string
	key  types.NamespacedName
	why  string
}

func (e *notOursError) Error() string {
	return fmt.Sprintf("%s %s already exists and %s; the WebApp will not take it over (delete or rename it)", e.kind, e.key, e.why)
}

// ours reports why obj may not be taken over by the WebApp owner, or "" when it may: it is controlled by that
// WebApp, or by nothing while it carries our managed-by label (a child an Orphan deletion released).
func ours(obj client.Object, owner types.UID) string {
	if ref := metav1.GetControllerOf(obj); ref != nil {
		if ref.UID == owner {
			return ""
		}
		return fmt.Sprintf("is controlled by %s %s", ref.Kind, ref.Name)
	}
	if obj.GetLabels()[LabelManagedBy] != ManagedBy {
		return "is not managed by " + ManagedBy
	}
	return ""
}

// ensure sends ch.desired with Server-Side Apply, forcing ownership, unless the fields our manager owns in the
// cached object already say the same. The cache holds only objects with our managed-by label, so when it has
// none the API server is asked (reader): an object of the same name that is not ours is left alone.
func ensure[T any, PT interface {
	*T
	client.Object
}, AC runtime.ApplyConfiguration](ctx context.Context, c client.Client, reader client.Reader, key types.NamespacedName, ch child[T, PT, AC]) (outcome[PT], error) {
	current := PT(new(T))
	err := c.Get(ctx, key, current)
	if apierrors.IsNotFound(err) {
		// Never created, deleted, not yet in the cache, or without our label: only the API server knows.
		current = PT(new(T))
		err = reader.Get(ctx, key, current)
	}
	switch {
	case apierrors.IsNotFound(err):
		if ch.onlyIfExists {
			return outcome[PT]{}, nil
		}
		return apply(ctx, c, key, ch, outcome[PT]{})
	case err != nil:
		return outcome[PT]{}, &childError{kind: ch.kind, key: key, err: err}
	}
	res := outcome[PT]{obj: current, before: current, existed: true}
	if why := ours(current, ch.owner); why != "" {
		if ch.onlyIfExists {
			// Releasing: what is not ours is not ours to release.
			return res, nil
		}
		return res, &notOursError{kind: ch.kind, key: key, why: why}
	}
	same, err := ownsAlready(ch, current)
	if err == nil && !same {
		// The cache can lag behind our own last apply: decide again on the object as the server has it, so a
		// stale cache costs a read, never a write (nor a false drift report).
		fresh := PT(new(T))
		switch err := reader.Get(ctx, key, fresh); {
		case apierrors.IsNotFound(err):
			res = outcome[PT]{}
			return apply(ctx, c, key, ch, res)
		case err != nil:
			return res, &childError{kind: ch.kind, key: key, err: err}
		}
		res.obj, res.before = fresh, fresh
		if why := ours(fresh, ch.owner); why != "" {
			return res, &notOursError{kind: ch.kind, key: key, why: why}
		}
		same, err = ownsAlready(ch, fresh)
	}
	switch {
	case err != nil:
		return res, err
	case same:
		return res, nil
	}
	return apply(ctx, c, key, ch, res)
}

// ownsAlready reports whether the fields our manager owns on obj say what ch.desired says.
func ownsAlready[T any, PT interface {
	*T
	client.Object
}, AC runtime.ApplyConfiguration](ch child[T, PT, AC], obj PT) (bool, error) {
	owned, err := ch.extract(obj, FieldManager)
	if err != nil {
		return false, fmt.Errorf("reading fields owned by %s on %s %s: %w", FieldManager, ch.kind, client.ObjectKeyFromObject(obj), err)
	}
	same, err := ownedFieldsMatch[T](ch.desired, owned)
	if err != nil {
		return false, fmt.Errorf("comparing %s %s: %w", ch.kind, client.ObjectKeyFromObject(obj), err)
	}
	return same, nil
}

// apply sends the apply request and returns the object as the server now has it.
func apply[T any, PT interface {
	*T
	client.Object
}, AC runtime.ApplyConfiguration](ctx context.Context, c client.Client, key types.NamespacedName, ch child[T, PT, AC], res outcome[PT]) (outcome[PT], error) {
	res.sent = true
	if err := c.Apply(ctx, ch.desired, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return res, &childError{kind: ch.kind, key: key, err: err}
	}
	// The apply response, decoded into desired by the client, is the object as the server now has it.
	applied := PT(new(T))
	if err := roundTrip(ch.desired, applied); err != nil {
		return res, fmt.Errorf("decoding applied %s %s: %w", ch.kind, key, err)
	}
	res.obj = applied
	return res, nil
}
