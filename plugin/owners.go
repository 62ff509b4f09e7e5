package plugin

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	webappv2 "github.com/example/webapp-operator/apis/v2"
)

// ObjectOwners is who owns each field of one object, by its managedFields.
type ObjectOwners struct {
	Kind   string       `json:"kind"`
	Name   string       `json:"name"`
	Fields []FieldOwner `json:"fields"`
	// Shared are the fields the operator's manager holds with another manager: both set the same value. When the
	// other sets another, the operator's next (forced) apply takes the field back.
	Shared []string `json:"shared,omitempty"`
}

// FieldOwner is one field (a leaf of the managed fields' sets, as structured-merge-diff names it) and every
// manager entry that holds it.
type FieldOwner struct {
	Field  string  `json:"field"`
	Owners []Owner `json:"owners"`
}

// Owner is one managedFields entry.
type Owner struct {
	Manager     string       `json:"manager"`
	Operation   string       `json:"operation"`
	Subresource string       `json:"subresource,omitempty"`
	Time        *metav1.Time `json:"time,omitempty"`
}

// Owners reads the managed fields of an object of kind: every field with the entries that hold it (by manager), in
// the order of the fields' paths, and the fields the operator shares with another manager.
func Owners(kind string, obj metav1.Object) (ObjectOwners, error) {
	out := ObjectOwners{Kind: kind, Name: obj.GetName()}
	byField := map[string]*FieldOwner{}
	var order []string
	ours := &fieldpath.Set{}
	others := &fieldpath.Set{}
	for _, e := range obj.GetManagedFields() {
		if e.FieldsV1 == nil {
			continue
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(strings.NewReader(e.FieldsV1.GetRawString())); err != nil {
			return out, fmt.Errorf("%s %s: the managed fields of %s: %w", kind, obj.GetName(), e.Manager, err)
		}
		leaves := set.Leaves()
		if e.Manager == webappv2.FieldManager {
			ours = ours.Union(leaves)
		} else {
			others = others.Union(leaves)
		}
		owner := Owner{Manager: e.Manager, Operation: string(e.Operation), Subresource: e.Subresource, Time: e.Time}
		leaves.Iterate(func(p fieldpath.Path) {
			key := p.String()
			f, ok := byField[key]
			if !ok {
				f = &FieldOwner{Field: key}
				byField[key] = f
				order = append(order, key)
			}
			f.Owners = append(f.Owners, owner)
		})
	}
	slices.Sort(order)
	for _, k := range order {
		f := byField[k]
		// By manager: the API server's order of the entries moves as they are written.
		slices.SortStableFunc(f.Owners, func(a, b Owner) int {
			return strings.Compare(a.Manager+"/"+a.Subresource, b.Manager+"/"+b.Subresource)
		})
		out.Fields = append(out.Fields, *f)
	}
	ours.Intersection(others).Iterate(func(p fieldpath.Path) { out.Shared = append(out.Shared, p.String()) })
	slices.Sort(out.Shared)
	return out, nil
}

// RenderOwners writes each object's fields as a table (field, manager, operation, subresource, time), then the
// fields the operator shares.
func RenderOwners(w io.Writer, objs []ObjectOwners) error {
	var b strings.Builder
	for i, o := range objs {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s %s\n", o.Kind, o.Name)
		b.WriteString("FIELD\tMANAGER\tOPERATION\tTIME\n")
		for _, f := range o.Fields {
			for _, m := range f.Owners {
				op := m.Operation
				if m.Subresource != "" {
					op += " (" + m.Subresource + ")"
				}
				when := ""
				if m.Time != nil {
					when = m.Time.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(&b, "%s\t%s\t%s\t%s\n", f.Field, m.Manager, op, when)
			}
		}
		if len(o.Shared) > 0 {
			fmt.Fprintf(&b, "Held by %s and another manager (the same value; if the other sets another, the operator's next apply takes it back):\n", webappv2.FieldManager)
			for _, f := range o.Shared {
				fmt.Fprintf(&b, "  %s\n", f)
			}
		}
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	if _, err := io.WriteString(tw, b.String()); err != nil {
		return err
	}
	return tw.Flush()
}
