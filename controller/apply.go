package controller

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// terminal reports whether retrying the same apply can never succeed: the server refuses the object itself
// (invalid, malformed). Only a change of the WebApp, which triggers a new reconcile anyway, can fix it.
func (e *childError) terminal() bool {
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
	// onlyIfExists skips the apply when the object is not in the cache (releasing a child must not create it).
	onlyIfExists bool
}

// outcome is what ensure found and did.
type outcome[PT client.Object] struct {
	obj     PT   // the object as it is now; nil when it does not exist
	existed bool // it was in the cache before
	sent    bool // an apply request was sent
}

// ensure sends ch.desired with Server-Side Apply, forcing ownership, unless the fields our manager owns in the
// cached object already say the same.
func ensure[T any, PT interface {
	*T
	client.Object
}, AC runtime.ApplyConfiguration](ctx context.Context, c client.Client, key types.NamespacedName, ch child[T, PT, AC]) (outcome[PT], error) {
	cached := PT(new(T))
	err := c.Get(ctx, key, cached)
	switch {
	case apierrors.IsNotFound(err):
		// Nothing cached (never created, deleted, or our labels removed so the cache dropped it): apply.
		if ch.onlyIfExists {
			return outcome[PT]{}, nil
		}
	case err != nil:
		return outcome[PT]{}, &childError{kind: ch.kind, key: key, err: err}
	default:
		owned, err := ch.extract(cached, FieldManager)
		if err != nil {
			return outcome[PT]{obj: cached, existed: true}, fmt.Errorf("reading fields owned by %s on %s %s: %w", FieldManager, ch.kind, key, err)
		}
		same, err := ownedFieldsMatch[T](ch.desired, owned)
		if err != nil {
			return outcome[PT]{obj: cached, existed: true}, fmt.Errorf("comparing %s %s: %w", ch.kind, key, err)
		}
		if same {
			return outcome[PT]{obj: cached, existed: true}, nil
		}
	}
	res := outcome[PT]{existed: err == nil, sent: true}
	if res.existed {
		res.obj = cached
	}
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
