package ssa

import (
	"fmt"
	"reflect"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	smdtyped "sigs.k8s.io/structured-merge-diff/v6/typed"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/desired"
)

// Server-Side Apply removes a field we stop sending only when no other field manager owns it too. A child that
// another manager co-owns (re-created from an exported manifest, or applied whole under another manager) keeps
// such a field, and with it a part of an older spec. Nothing in the object then says that the field was ours, so
// what an apply let go of and found kept is remembered in the WebApp's status (status.retainedFields), and looked
// at again while it is listed.

// MaxRetained bounds status.retainedFields (its CRD MaxItems).
const MaxRetained = 64

// RetainedFields lists, for a child of kind, the fields our manager owned in before and no longer owns in after
// (the object as our apply left it), that other managers of after still own: each with those managers.
func RetainedFields(kind string, before, after client.Object) []webappv2.RetainedField {
	if before == nil || after == nil {
		return nil
	}
	ours, err := ourFields(before.GetManagedFields())
	if err != nil || ours.Empty() {
		return nil
	}
	now, err := ourFields(after.GetManagedFields())
	if err != nil {
		return nil
	}
	released := ours.Difference(now)
	if released.Empty() {
		return nil
	}
	return heldBy(kind, released, after.GetManagedFields())
}

// StillRetained keeps of listed, the retained fields of a child of kind reported before, those that obj (read from
// the API server, with every manager's entry) still has under another manager and our manager does not own again.
// Paths are compared as paths, not strings: a key with a dot ("example.com/a.b") is not below "example.com/a".
func StillRetained(kind string, listed []webappv2.RetainedField, obj client.Object) []webappv2.RetainedField {
	if obj == nil {
		return nil
	}
	ours, err := ourFields(obj.GetManagedFields())
	if err != nil {
		return nil
	}
	var kept []webappv2.RetainedField
	for _, f := range listed {
		if f.Kind != kind {
			continue
		}
		var managers []string
		for _, e := range obj.GetManagedFields() {
			if e.Manager == webappv2.FieldManager || e.Subresource != "" || !slices.Contains(f.Managers, e.Manager) {
				continue
			}
			set, err := entrySet(e)
			if err != nil {
				continue
			}
			if p, ok := findPath(set, f.Field); ok && !covers(ours, p) {
				managers = append(managers, e.Manager)
			}
		}
		if len(managers) > 0 {
			slices.Sort(managers)
			f.Managers = slices.Compact(managers)
			kept = append(kept, f)
		}
	}
	return kept
}

// findPath is the path of set's members whose string form is s.
func findPath(set *fieldpath.Set, s string) (fieldpath.Path, bool) {
	var found fieldpath.Path
	set.Iterate(func(p fieldpath.Path) {
		if found == nil && p.String() == s {
			found = p.Copy()
		}
	})
	return found, found != nil
}

// covers reports whether set has p, or a field below it.
func covers(set *fieldpath.Set, p fieldpath.Path) bool {
	if set.Has(p) {
		return true
	}
	for _, pe := range p {
		if set = set.WithPrefix(pe); set.Empty() {
			return false
		}
	}
	return true
}

// heldBy is the part of set that the entries of other managers (main resource only) own, as retained fields: the
// top-most paths only (an env entry, not each of its fields), each with the managers owning it, sorted by path.
func heldBy(kind string, set *fieldpath.Set, entries []metav1.ManagedFieldsEntry) []webappv2.RetainedField {
	byPath := map[string][]string{}
	var order []string
	for _, e := range entries {
		if e.Manager == webappv2.FieldManager || e.Subresource != "" {
			continue
		}
		theirs, err := entrySet(e)
		if err != nil {
			continue
		}
		held := set.Intersection(theirs)
		held.Iterate(func(p fieldpath.Path) {
			if hasStrictPrefixIn(held, p) {
				return
			}
			s := p.String()
			if _, seen := byPath[s]; !seen {
				order = append(order, s)
			}
			byPath[s] = append(byPath[s], e.Manager)
		})
	}
	slices.Sort(order)
	var out []webappv2.RetainedField
	for _, s := range order {
		managers := byPath[s]
		slices.Sort(managers)
		out = append(out, withinLimits(webappv2.RetainedField{Kind: kind, Field: s, Managers: slices.Compact(managers)}))
	}
	return out
}

// The CRD's limits of a retained field: a path or manager name past them would make the status unwritable.
const (
	maxFieldPath   = 1024
	maxManagers    = 16
	maxManagerName = 256
)

// withinLimits cuts f to the CRD's limits (a cut path no longer matches the child's, so it is reported once, then
// dropped by StillRetained).
func withinLimits(f webappv2.RetainedField) webappv2.RetainedField {
	if len(f.Field) > maxFieldPath {
		f.Field = f.Field[:maxFieldPath-3] + "..."
	}
	if len(f.Managers) > maxManagers {
		f.Managers = f.Managers[:maxManagers]
	}
	for i, m := range f.Managers {
		if len(m) > maxManagerName {
			f.Managers[i] = m[:maxManagerName-3] + "..."
		}
	}
	return f
}

// hasStrictPrefixIn reports whether a proper prefix of p is itself in set: then p is a part of a field listed whole.
func hasStrictPrefixIn(set *fieldpath.Set, p fieldpath.Path) bool {
	for i := 1; i < len(p); i++ {
		if set.Has(p[:i]) {
			return true
		}
	}
	return false
}

// ourFields is the set of fields our manager owns on the main resource, from entries.
func ourFields(entries []metav1.ManagedFieldsEntry) (*fieldpath.Set, error) {
	set := &fieldpath.Set{}
	for _, e := range entries {
		if e.Manager != webappv2.FieldManager || e.Subresource != "" {
			continue
		}
		s, err := entrySet(e)
		if err != nil {
			return nil, err
		}
		set = set.Union(s)
	}
	return set, nil
}

func entrySet(e metav1.ManagedFieldsEntry) (*fieldpath.Set, error) {
	set := &fieldpath.Set{}
	if e.FieldsV1 == nil {
		return set, nil
	}
	if err := set.FromJSON(e.FieldsV1.GetRawReader()); err != nil {
		return nil, fmt.Errorf("reading the fields of manager %s: %w", e.Manager, err)
	}
	return set, nil
}

// Releases reports whether applying want to before lets go of a field our manager owns there (or cannot tell).
func Releases(types managedfields.TypeConverter, before client.Object, want any) bool {
	if before == nil || reflect.ValueOf(before).IsNil() {
		return false
	}
	ours, err := ourFields(before.GetManagedFields())
	if err != nil {
		return true
	}
	if ours.Empty() {
		return false
	}
	u := &unstructured.Unstructured{}
	if err := desired.RoundTrip(want, &u.Object); err != nil {
		return true
	}
	tv, err := types.ObjectToTyped(u, smdtyped.AllowDuplicates)
	if err != nil {
		return true
	}
	sent, err := tv.ToFieldSet()
	if err != nil {
		return true
	}
	return !ours.Difference(sent).Empty()
}
