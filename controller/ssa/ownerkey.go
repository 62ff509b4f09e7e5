package ssa

import (
	"context"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv2 "github.com/example/webapp-operator/apis/v2"
)

// The cache keeps our managedFields entry of each child with its owner's UID taken out, so that the children of
// one shape share one copy of it. A child's owner reference is an item of a list keyed by UID, so the field set of
// our entry names it by a key holding the WebApp's UID (`k:{"uid":"…"}`), which made each child's entry unique: the
// build's interning (the fieldsv1string tag, see docs/scale.md) saved nothing for children, and at 10,000
// WebApps their entries were the largest part of the cached Deployments and Services. SharedOwnerKey (part of
// the cache's transform) puts a placeholder in place of the key of the object's own controller; WithOwnerKey puts
// the key back, from the same object's controller reference, on every object the reconciler reads through its
// client (OwnerKeyClient), before anything compares or extracts the fields we own. An object read from the cache
// in place (the resync, the canary's extraction of a pod template) still holds the placeholder: only the owner
// reference's entry differs there, which those reads do not look at.

// OwnerKeyPlaceholder stands in the cache for the key of the object's controller reference in our entry's field set.
// It is no UID the API server makes, and our manager applies no owner reference but the WebApp's.
const OwnerKeyPlaceholder = `"k:{\"uid\":\"(controller)\"}"`

// OwnerKey is the key of the owner reference of uid in a field set's JSON.
func OwnerKey(uid types.UID) string { return `"k:{\"uid\":\"` + string(uid) + `\"}"` }

// SharedOwnerKey replaces, in our managedFields entries of obj (the cache's copy, which the transform may change),
// the key of obj's controller reference with the placeholder. Entries that hold the placeholder already (none of
// ours can) and objects without a controller are left as they are.
func SharedOwnerKey(obj client.Object) {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.UID == "" {
		return
	}
	swapOwnerKey(obj, OwnerKey(ref.UID), OwnerKeyPlaceholder)
}

// WithOwnerKey puts back, in our managedFields entries of obj, the key of obj's controller reference where the
// cache has the placeholder. obj must be the caller's copy.
func WithOwnerKey(obj client.Object) {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.UID == "" {
		return
	}
	swapOwnerKey(obj, OwnerKeyPlaceholder, OwnerKey(ref.UID))
}

// swapOwnerKey replaces from with to in the field sets of our entries of obj that hold from and not to, in a new
// slice of entries (the old one may be shared with the cache).
func swapOwnerKey(obj client.Object, from, to string) {
	entries := obj.GetManagedFields()
	cloned := false
	for i, e := range entries {
		if e.Manager != webappv2.FieldManager || e.FieldsV1 == nil {
			continue
		}
		raw := e.FieldsV1.GetRawString()
		if !strings.Contains(raw, from) || strings.Contains(raw, to) {
			continue
		}
		if !cloned {
			entries, cloned = slices.Clone(entries), true
		}
		fields := &metav1.FieldsV1{}
		fields.SetRawString(strings.Replace(raw, from, to, 1))
		entries[i].FieldsV1 = fields
	}
	if cloned {
		obj.SetManagedFields(entries)
	}
}

// OwnerKeyClient is the reconciler's client: what it reads from the cache, as a copy, has our entries' owner key
// back (WithOwnerKey). A read in place (client.UnsafeDisableDeepCopy) is the cache's object and is left alone.
type OwnerKeyClient struct{ client.Client }

// Get reads obj, with our entry's owner key back in a copy from the cache.
func (c OwnerKeyClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if !slices.ContainsFunc(opts, func(o client.GetOption) bool { return o == client.UnsafeDisableDeepCopy }) {
		WithOwnerKey(obj)
	}
	return nil
}

// List reads list, with our entries' owner keys back in copies from the cache.
func (c OwnerKeyClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if slices.ContainsFunc(opts, func(o client.ListOption) bool { return o == client.UnsafeDisableDeepCopy }) {
		return nil
	}
	return meta.EachListItem(list, func(o runtime.Object) error {
		if obj, ok := o.(client.Object); ok {
			WithOwnerKey(obj)
		}
		return nil
	})
}
