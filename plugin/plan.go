package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller"
	"github.com/example/webapp-operator/controller/canary"
	"github.com/example/webapp-operator/controller/desired"
	"github.com/example/webapp-operator/conversion"
)

// Plan is what applying a changed WebApp manifest will do, from the API server's dry runs: the WebApp's, then
// each child's as the operator would apply it.
type Plan struct {
	WebApp string `json:"webApp"`
	// Refused is the API server's refusal of the WebApp (nothing else is planned then).
	Refused string `json:"refused,omitempty"`
	// Changes are the WebApp's fields that change.
	Changes  []Change    `json:"changes,omitempty"`
	Children []ChildPlan `json:"children,omitempty"`
	// Canary says what a canary strategy does with the change.
	Canary string `json:"canary,omitempty"`
}

// ChildPlan is what the change does to one child.
type ChildPlan struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Action: Create, Update, Unchanged, Delete, Release, Refused or Left (as it is; Note says why).
	Action      string   `json:"action"`
	Changes     []Change `json:"changes,omitempty"`
	PodsRestart bool     `json:"podsRestart,omitempty"`
	Note        string   `json:"note,omitempty"`
	// KeptByOthers are the child's fields other managers hold, which the operator's apply leaves them.
	KeptByOthers []string `json:"keptByOthers,omitempty"`
}

// Change is one field whose value changes ("": absent).
type Change struct {
	Field string `json:"field"`
	From  string `json:"from,omitempty"`
	To    string `json:"to,omitempty"`
}

// plan dry-runs manifest (a WebApp of either version, applied with fieldManager as `kubectl apply --server-side` would) and each
// child the operator's builders make of the result, and says what changes. Nothing is written.
func plan(ctx context.Context, c client.Client, manifest []byte, namespace, fieldManager string) (Plan, error) {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(manifest, &u.Object); err != nil {
		return Plan{}, fmt.Errorf("reading the manifest: %w", err)
	}
	gvk := u.GroupVersionKind()
	if gvk != webappv2.GroupVersion.WithKind("WebApp") && gvk != webappv1.GroupVersion.WithKind("WebApp") {
		return Plan{}, fmt.Errorf("the manifest is a %s %s: plan reads one WebApp (%s or %s)", gvk.GroupVersion(), gvk.Kind, webappv2.GroupVersion, webappv1.GroupVersion)
	}
	if u.GetNamespace() == "" {
		u.SetNamespace(namespace)
	}
	p := Plan{WebApp: u.GetNamespace() + "/" + u.GetName()}
	cur := &webappv2.WebApp{}
	switch err := c.Get(ctx, client.ObjectKeyFromObject(u), cur); {
	case apierrors.IsNotFound(err):
		cur = nil
	case err != nil:
		return p, err
	}
	ac := client.ApplyConfigurationFromUnstructured(u)
	if err := c.Apply(ctx, ac, client.FieldOwner(fieldManager), client.DryRunAll); err != nil {
		if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) && !apierrors.IsConflict(err) && !apierrors.IsBadRequest(err) {
			return p, err
		}
		p.Refused = err.Error()
		return p, nil
	}
	next := &webappv2.WebApp{}
	if gvk.Version == webappv1.GroupVersion.Version {
		// As the operator reads it: converted to v2 by the conversion the API server's webhook runs.
		old := &webappv1.WebApp{}
		if err := convertInto(ac, old); err != nil {
			return p, err
		}
		if err := conversion.ToHub(old, next); err != nil {
			return p, err
		}
	} else if err := convertInto(ac, next); err != nil {
		return p, err
	}
	p.Changes = Diff(cur, next)
	planned := controller.Plan(ctx, c, next)
	if next.Spec.Rollout.Canary != nil || cur != nil && cur.Status.Canary != nil {
		p.Canary = canaryPlan(cur, next, planned, time.Now())
	}
	for _, want := range planned.Children {
		cp, err := planChild(ctx, c, next, want)
		if err != nil {
			return p, err
		}
		if cp != nil {
			p.Children = append(p.Children, *cp)
		}
	}
	return p, nil
}

// planChild dry-runs one child as the operator would apply it (under its field manager, forced) and compares the
// result with the child as it is; nil when the child neither exists nor is wanted.
func planChild(ctx context.Context, c client.Client, app *webappv2.WebApp, want controller.Planned) (*ChildPlan, error) {
	obj := want.Object
	kind := kindOf(obj)
	cp := &ChildPlan{Kind: kind, Name: obj.GetName()}
	cur := obj.DeepCopyObject().(client.Object)
	switch err := c.Get(ctx, client.ObjectKeyFromObject(obj), cur); {
	case apierrors.IsNotFound(err):
		cur = nil
	case err != nil && meta.IsNoMatchError(err):
		// Its API is not served here (the Gateway API not installed): the operator writes none.
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading %s %s: %w", kind, obj.GetName(), err)
	}
	ours := cur != nil && controlledBy(cur, app)
	if cur != nil && !ours && app.UID != "" {
		cp.Action, cp.Note = "Left", "it is not the WebApp's (another controller, or none): the operator never takes it over"
		return cp, nil
	}
	if ours {
		cp.KeptByOthers = keptByOthers(kind, cur)
	}
	switch {
	case errors.Is(want.Err, controller.ErrCanaryDecides):
		if cur == nil {
			return nil, nil
		}
		cp.Action, cp.Note = "Left", "the canary's next step decides it (see canary)"
		return cp, nil
	case want.Err != nil:
		cp.Action, cp.Note = "Left", "the operator leaves it as it is: "+want.Err.Error()
		return cp, nil
	case want.Apply == nil && cur == nil:
		return nil, nil
	case want.Apply == nil && want.Kept:
		cp.Action, cp.Note = "Release", "no longer wanted: the operator lets it go (its owner reference removed), never deletes it"
		return cp, nil
	case want.Apply == nil:
		cp.Action = "Delete"
		return cp, nil
	}
	if err := c.Apply(ctx, want.Apply, client.FieldOwner(webappv2.FieldManager), client.ForceOwnership, client.DryRunAll); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsInternalError(err) {
			return nil, err
		}
		cp.Action, cp.Note = "Refused", err.Error()
		return cp, nil
	}
	next := obj.DeepCopyObject().(client.Object)
	if err := convertInto(want.Apply, next); err != nil {
		return nil, err
	}
	cp.Changes = Diff(cur, next)
	switch {
	case cur == nil:
		cp.Action = "Create"
	case len(cp.Changes) == 0:
		cp.Action = "Unchanged"
	default:
		cp.Action = "Update"
		cp.PodsRestart = podTemplateMoves(cur, next)
	}
	return cp, nil
}

// convertInto decodes what the server answered into an apply configuration into obj.
func convertInto(ac runtime.ApplyConfiguration, obj any) error {
	b, err := json.Marshal(ac)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, obj)
}

// podTemplateMoves: the Deployment's pod template changes, so its pods are replaced.
func podTemplateMoves(cur, next client.Object) bool {
	a, b := fields(cur), fields(next)
	spec := func(m map[string]any) any {
		s, _ := m["spec"].(map[string]any)
		return s["template"]
	}
	if a == nil || b == nil {
		return false
	}
	return !equality.Semantic.DeepEqual(spec(a), spec(b))
}

// keptByOthers are the fields of obj that managers other than the operator hold and it does not.
func keptByOthers(kind string, obj client.Object) []string {
	o, err := Owners(kind, obj)
	if err != nil {
		return nil
	}
	var out []string
	for _, f := range o.Fields {
		var managers []string
		ours := false
		for _, m := range f.Owners {
			if m.Manager == webappv2.FieldManager {
				ours = true
			} else if !slices.Contains(managers, m.Manager) {
				managers = append(managers, m.Manager)
			}
		}
		if !ours && len(managers) > 0 {
			out = append(out, f.Field+" ("+strings.Join(managers, ", ")+")")
		}
	}
	return out
}

// canaryPlan says what a canary strategy does with the change at now, as the step machine (controller/canary)
// decides it from the WebApp's status.canary: a canary under way goes on, or is left (its pods retiring after the
// route when it sent them traffic); a version set back to within the rollback window is rolled back to at once; a
// rolled-back one stays so; another starts a canary (or a blue/green's preview). "" when there is nothing to say.
func canaryPlan(cur, next *webappv2.WebApp, planned controller.PlannedChildren, now time.Time) string {
	if planned.Err != nil {
		return "the new revision is not known (" + planned.Err.Error() + ")"
	}
	var c *webappv2.CanaryStatus
	if cur != nil {
		c = cur.Status.Canary
	}
	spec := next.Spec.Rollout.Canary
	if spec == nil {
		if c == nil || c.CanaryRevision == "" {
			return ""
		}
		return fmt.Sprintf("spec.rollout.canary is taken out: the Deployment runs revision %s; the canary of revision %s %s", planned.Revision, c.CanaryRevision, leftWords(c, cur, next))
	}
	if c == nil || c.StableRevision == "" {
		return fmt.Sprintf("revision %s is the first: it becomes stable without a canary", planned.Revision)
	}
	stable, running := c.StableRevision, c.CanaryRevision
	switch {
	case running != "" && planned.Revision == running && c.Phase == "Promoting":
		return fmt.Sprintf("revision %s goes on being promoted", running)
	case running != "" && planned.Revision == running:
		return fmt.Sprintf("the canary of revision %s goes on where it is (step %d of %d)", running, c.Step+1, len(spec.EffectiveSteps()))
	case planned.Revision == stable && running != "":
		return fmt.Sprintf("the spec is set back to revision %s, which serves: the canary of revision %s %s", stable, running, leftWords(c, cur, next))
	case planned.Revision == stable:
		return fmt.Sprintf("the revision stays %s: no canary starts", stable)
	case planned.Revision == c.FailedRevision:
		words := fmt.Sprintf("revision %s was rolled back: applying it again does not start it again (kubectl webapp retry does)", planned.Revision)
		if running != "" {
			words = fmt.Sprintf("the canary of revision %s %s; %s", running, leftWords(c, cur, next), words)
		}
		return words
	case running == "" && planned.Revision == c.PreviousRevision && spec.RollbackWindowSeconds > 0 && c.PreviousUntil != nil && now.Before(c.PreviousUntil.Time):
		if spec.KeepPreviousWarm && spec.RollbackWindowSeconds > 0 && c.Phase == "Stable" {
			return fmt.Sprintf("revision %s is the version before the last promotion, within its rollback window (until %s): it is stable again at once; its pods kept warm in %s-canary, once every one is ready, get all the traffic at once while the Deployment rolls back to it (otherwise the Deployment rolls back without a canary)",
				planned.Revision, c.PreviousUntil.UTC().Format(time.RFC3339), next.Name)
		}
		return fmt.Sprintf("revision %s is the version before the last promotion, within its rollback window (until %s): it is stable again at once, the Deployment rolling back to it without a canary",
			planned.Revision, c.PreviousUntil.UTC().Format(time.RFC3339))
	}
	words := ""
	if running != "" {
		words = fmt.Sprintf("the canary of revision %s %s; then ", running, leftWords(c, cur, next))
		if c.Phase == "Promoting" {
			// (Its promotion did not complete, but the Deployment runs it, or rolls to it: it is stable.)
			stable = running
		}
	}
	if spec.BlueGreen != nil {
		return words + fmt.Sprintf("revision %s starts %s beside revision %s, previewed with none of the traffic until the blue/green switch", planned.Revision, desired.SizeWords(spec.BlueGreen.PreviewSize()), stable)
	}
	return words + fmt.Sprintf("a canary of revision %s starts beside revision %s, at %d%% of the traffic (step 1 of %d)", planned.Revision, stable, spec.Steps[0].Weight, len(spec.Steps))
}

// retireLeaving is how long the pods of cur's canary stay once next is applied: next's retireSeconds, or with the
// strategy taken out, cur's (as its status keeps it).
func retireLeaving(cur, next *webappv2.WebApp) time.Duration {
	if next.Spec.Rollout.Canary != nil {
		return desired.CanaryRetire(next)
	}
	return retireOf(cur)
}

// leftWords say what becomes of a canary the spec leaves (c, cur's status; next, the spec applied): behind a route
// (or a blue/green's switch without one) that sent it traffic its pods retire retireSeconds after the traffic leaves it;
// otherwise they go at once.
func leftWords(c *webappv2.CanaryStatus, cur, next *webappv2.WebApp) string {
	s := canary.State{Step: int(c.Step)}
	if c.StepStartedAt != nil {
		s.Since = c.StepStartedAt.Time
	}
	by := trafficBy(next)
	if !desired.CanaryShared(cur) && desired.CanaryShared(next) {
		// (The form the canary ran in: its own Service, behind a route or a blue/green's switch.)
		by = trafficBy(cur)
	}
	switch {
	case desired.CanaryShared(cur) && desired.CanaryShared(next):
		return "is left: its pods go at once, leaving the one Service as any pod going does"
	case s.TrafficSent(c.Phase == string(canary.PhasePromoting)):
		return fmt.Sprintf("is left: %s sends it nothing from then on, and its pods go %s later, answering the requests already on their way", by, retireLeaving(cur, next))
	}
	return fmt.Sprintf("is left: %s has sent it nothing yet, and its pods go at once", by)
}

// ignored are the fields a diff leaves out: the type (a typed object read carries none), the server's bookkeeping,
// and what controllers report.
var ignored = []string{".apiVersion", ".kind", ".metadata.managedFields", ".metadata.resourceVersion", ".metadata.generation", ".metadata.uid", ".metadata.creationTimestamp", ".status"}

// Diff lists the fields whose value differs between cur and next (nil: every field of next is new), each leaf by
// its path, leaving out the server's bookkeeping and the status. A list is compared item by item.
func Diff(cur, next any) []Change {
	a, b := fields(cur), fields(next)
	flatA, flatB := map[string]string{}, map[string]string{}
	flatten("", a, flatA)
	flatten("", b, flatB)
	var keys []string
	for k := range flatA {
		keys = append(keys, k)
	}
	for k := range flatB {
		if _, ok := flatA[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []Change
	for _, k := range keys {
		if slices.ContainsFunc(ignored, func(p string) bool { return k == p || strings.HasPrefix(k, p+".") || strings.HasPrefix(k, p+"[") }) {
			continue
		}
		if flatA[k] != flatB[k] {
			out = append(out, Change{Field: k, From: flatA[k], To: flatB[k]})
		}
	}
	return out
}

// fields is v as generic JSON (nil for a nil object, typed or not: it marshals as null).
func fields(v any) map[string]any {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}

// flatten puts each leaf of v into out by its path (.a.b[0].c).
func flatten(path string, v any, out map[string]string) {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			flatten(path+"."+k, x, out)
		}
	case []any:
		for i, x := range t {
			flatten(fmt.Sprintf("%s[%d]", path, i), x, out)
		}
	case nil:
	default:
		b, _ := json.Marshal(t)
		out[path] = string(b)
	}
}

// RenderPlan writes the plan: the WebApp's changes, then each child's action and changes, and what a canary does.
func RenderPlan(w io.Writer, p Plan) error {
	var b strings.Builder
	if p.Refused != "" {
		fmt.Fprintf(&b, "WebApp %s: the API server refuses it, nothing would be written:\n  %s\n", p.WebApp, p.Refused)
		_, err := io.WriteString(w, b.String())
		return err
	}
	switch len(p.Changes) {
	case 0:
		fmt.Fprintf(&b, "WebApp %s: no field changes\n", p.WebApp)
	case 1:
		fmt.Fprintf(&b, "WebApp %s: 1 field changes\n", p.WebApp)
	default:
		fmt.Fprintf(&b, "WebApp %s: %d fields change\n", p.WebApp, len(p.Changes))
	}
	writeChanges(&b, p.Changes)
	if p.Canary != "" {
		fmt.Fprintf(&b, "Canary: %s\n", p.Canary)
	}
	for _, c := range p.Children {
		words := c.Action
		switch {
		case c.Action == "Update" && c.PodsRestart:
			words += ": its pods are replaced (the pod template changes)"
		case c.Action == "Update" && c.Kind == "Deployment":
			words += ": no pod restart (the pod template does not change)"
		}
		if c.Note != "" {
			words += ": " + c.Note
		}
		fmt.Fprintf(&b, "%s %s: %s\n", c.Kind, c.Name, words)
		writeChanges(&b, c.Changes)
		for _, f := range c.KeptByOthers {
			fmt.Fprintf(&b, "    stays with its manager: %s\n", f)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeChanges(b *strings.Builder, changes []Change) {
	for _, c := range changes {
		switch {
		case c.From == "":
			fmt.Fprintf(b, "    + %s: %s\n", c.Field, short(c.To))
		case c.To == "":
			fmt.Fprintf(b, "    - %s: %s\n", c.Field, short(c.From))
		default:
			fmt.Fprintf(b, "    ~ %s: %s -> %s\n", c.Field, short(c.From), short(c.To))
		}
	}
}

// short is a value cut to 80 characters.
func short(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}
