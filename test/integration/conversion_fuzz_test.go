package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/conversion"
	"github.com/example/webapp-operator/test/gen"
	"github.com/example/webapp-operator/test/testutil"
)

// v1Action is one thing a v1 client (or an oversized or forging one) does to a WebApp: it returns the kubectl
// command that replays it, and changes want to what the v2 spec must be after it.
type v1Action struct {
	name string
	do   func(c *convCase) (replay string, err error)
}

// convCase is one WebApp under random v1 actions, and the test's model of its v2 spec.
type convCase struct {
	t      *testing.T
	rng    *rand.Rand
	g      *gen.Gen
	ns     string
	name   string
	create string // the v2 manifest it was created with
	want   webappv2.WebAppSpec
	steps  []string        // kubectl commands that replay what was done
	owners map[string]bool // field managers the test used on it
}

var v1Actions = []v1Action{
	// A v1 client reads, changes the image (or nothing), and writes the object back.
	{"v1 replace after read", func(c *convCase) (string, error) {
		edit := c.rng.IntN(2) == 0
		img := c.g.Image()
		// Read, change and write again when the operator's status write came in between, as kubectl edit does.
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			app := &webappv1.WebApp{}
			if err := get(context.Background(), c.ns, c.name, app); err != nil {
				return err
			}
			if edit {
				app.Spec.Image = img
			} else {
				img = app.Spec.Image
			}
			return k8s.Update(context.Background(), app, client.FieldOwner("v1-editor"))
		}); err != nil {
			return "", err
		}
		c.want.Image = img
		return fmt.Sprintf("kubectl get webapps.v1.example.com %s -o json | jq '.spec.image=%q' | kubectl replace --field-manager=v1-editor -f -", c.name, img), nil
	}},
	// kubectl label / annotate through v1.
	{"v1 label patch", func(c *convCase) (string, error) {
		k, v := fmt.Sprintf("l%d", c.rng.IntN(3)), fmt.Sprintf("v%d", c.rng.IntN(100))
		return fmt.Sprintf("kubectl label --overwrite --field-manager=kubectl-label webapps.v1.example.com %s %s=%s", c.name, k, v),
			c.mergePatch("kubectl-label", map[string]any{"metadata": map[string]any{"labels": map[string]string{k: v}}})
	}},
	{"v1 annotation patch", func(c *convCase) (string, error) {
		k, v := fmt.Sprintf("note%d", c.rng.IntN(3)), fmt.Sprintf("n%d", c.rng.IntN(100))
		return fmt.Sprintf("kubectl annotate --overwrite --field-manager=kubectl-annotate webapps.v1.example.com %s %s=%s", c.name, k, v),
			c.mergePatch("kubectl-annotate", map[string]any{"metadata": map[string]any{"annotations": map[string]string{k: v}}})
	}},
	// kubectl get -o yaml at v1, then kubectl apply --server-side of that file.
	{"v1 server-side apply of an export", func(c *convCase) (string, error) {
		replay := fmt.Sprintf("kubectl get webapps.v1.example.com %s -o yaml > export.yaml && kubectl apply --server-side --field-manager=exporter -f export.yaml", c.name)
		var err error
		for range 5 {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion(webappv1.GroupVersion.String())
			u.SetKind("WebApp")
			if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: c.ns, Name: c.name}, u); err != nil {
				return "", err
			}
			// What apply refuses or the server sets: everything else of the export is sent, its status included.
			u.SetManagedFields(nil)
			u.SetResourceVersion("")
			u.SetUID("")
			u.SetCreationTimestamp(metav1.Time{})
			u.SetGeneration(0)
			err = k8s.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("exporter"))
			if !apierrors.IsConflict(err) || !onlyStaleStatus(err) {
				break
			}
			// The operator wrote the status since the export was read: the server-side apply of a stale status
			// conflicts with it, as for any export; export again.
		}
		return replay, err
	}},
	// A hand-written v1 manifest, applied with --force-conflicts as a GitOps tool would.
	{"v1 server-side apply of a hand-written manifest", func(c *convCase) (string, error) {
		img, replicas, port := c.g.Image(), int32(1+c.rng.IntN(10)), int32(1+c.rng.IntN(65535))
		if c.rng.IntN(3) == 0 && len(c.want.Ports) > 1 {
			// The number of another port: that port is left out (conversion's rule; the v1 client's port wins).
			port = c.want.Ports[1+c.rng.IntN(len(c.want.Ports)-1)].Port
		}
		manifest := fmt.Sprintf(`{"apiVersion":"example.com/v1","kind":"WebApp","metadata":{"name":%q,"namespace":%q},"spec":{"image":%q,"replicas":%d,"port":%d}}`, c.name, c.ns, img, replicas, port)
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal([]byte(manifest), &u.Object); err != nil {
			return "", err
		}
		if err := k8s.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("gitops-v1"), client.ForceOwnership); err != nil {
			return "", err
		}
		c.want.Image = img
		// v1 shows an unset count as 1: a 1 leaves it unset.
		if replicas != 1 || c.want.Replicas != nil {
			c.want.Replicas = ptr.To(replicas)
		}
		ports := []webappv2.Port{{Name: c.want.Ports[0].Name, Port: port}}
		for _, p := range c.want.Ports[1:] {
			if p.Port != port {
				ports = append(ports, p)
			}
		}
		c.want.Ports = ports
		return fmt.Sprintf("kubectl apply --server-side --force-conflicts --field-manager=gitops-v1 -f - <<'EOF'\n%s\nEOF", manifest), nil
	}},
	// The legacy conversion-data annotation, forged (valid or not): never stored, and ignored where the object
	// carries conversion data of its own.
	{"v1 forged conversion-data annotation", func(c *convCase) (string, error) {
		app := &webappv1.WebApp{}
		if err := get(context.Background(), c.ns, c.name, app); err != nil {
			return "", err
		}
		// Where the object has no conversion data of its own the annotation is read, and what v2 accepts of it
		// restored: only data v2 refuses whole keeps the spec as it was then.
		forged := c.forgedData(app.Status.ConversionData != "")
		return fmt.Sprintf("kubectl annotate --overwrite --field-manager=forger webapps.v1.example.com %s %s=%q", c.name, conversion.LegacyDataAnnotation, forged),
			c.mergePatch("forger", map[string]any{"metadata": map[string]any{"annotations": map[string]string{conversion.LegacyDataAnnotation: forged}}})
	}},
	// Annotations as large as the API allows (256 KiB in all), written in v2: every v1 read must still work.
	{"v2 oversized annotations", func(c *convCase) (string, error) {
		app := &webappv2.WebApp{}
		if err := get(context.Background(), c.ns, c.name, app); err != nil {
			return "", err
		}
		used := 0
		for k, v := range app.Annotations {
			if k != "big" {
				used += len(k) + len(v)
			}
		}
		v := strings.Repeat("x", max(1, 256*1024-used-len("big")-c.rng.IntN(64)))
		return fmt.Sprintf("kubectl annotate --overwrite --field-manager=big webapps.v2.example.com %s big=$(head -c %d /dev/zero | tr '\\0' x)", c.name, len(v)),
			c.mergePatchV2("big", map[string]any{"metadata": map[string]any{"annotations": map[string]string{"big": v}}})
	}},
	// Another manager's v2 apply of the image: it may conflict only on a field v2 has.
	{"v2 server-side apply by another manager", func(c *convCase) (string, error) {
		img := c.g.Image()
		manifest := fmt.Sprintf(`{"apiVersion":"example.com/v2","kind":"WebApp","metadata":{"name":%q,"namespace":%q},"spec":{"image":%q}}`, c.name, c.ns, img)
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal([]byte(manifest), &u.Object); err != nil {
			return "", err
		}
		err := k8s.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("v2-applier"))
		if apierrors.IsConflict(err) {
			// A conflict names fields another manager set to other values; none may be one that v2 does not have.
			if msg := err.Error(); strings.Contains(msg, "conversion") || strings.Contains(msg, ".status") {
				return "", fmt.Errorf("a v2 apply conflicts on a field v2's writers do not own: %w", err)
			}
			err = k8s.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("v2-applier"), client.ForceOwnership)
		}
		if err != nil {
			return "", err
		}
		c.want.Image = img
		return fmt.Sprintf("kubectl apply --server-side --field-manager=v2-applier -f - <<'EOF'\n%s\nEOF", manifest), nil
	}},
}

// onlyStaleStatus says whether an apply's conflicts are all with the operator's status fields, and none with the
// conversion's.
func onlyStaleStatus(err error) bool {
	// One conflict is said on one line: `Apply failed with 1 conflict: conflict with "webapp-operator" with
	// subresource "status": .status.replicasSetBy`; more, one per line after the first.
	const one = `conflict with "webapp-operator" with subresource "status": `
	if _, path, ok := strings.Cut(err.Error(), one); ok && !strings.Contains(path, "\n") {
		return strings.HasPrefix(path, ".status.") && !strings.Contains(path, "conversion")
	}
	lines := strings.Split(err.Error(), "\n")
	for _, l := range lines[1:] {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "conflicts with") {
			continue
		}
		if !strings.HasPrefix(l, "- .status.") || strings.Contains(l, "conversion") {
			return false
		}
	}
	return strings.Contains(lines[0], "conflicts with \"webapp-operator\" with subresource \"status\"")
}

// TestV1ActionsChangeOnlyWhatTheyMean: random v2 WebApps (every field, annotations up to the API's limit), then
// random actions of v1 clients under several field managers (replace after read, label and annotation patches,
// server-side apply of an export and of a hand-written manifest, a forged conversion-data annotation) and of v2
// ones, through the real API server and conversion webhook, with the operator running. After every action the v2
// spec is what the action meant and nothing else, the generation moved only with the spec, every read and list in
// both versions succeeds, no manager owns a field it did not set, and nothing of the conversion is stored; at the
// end the operator settles with zero writes, also after a restart.
func TestV1ActionsChangeOnlyWhatTheyMean(t *testing.T) {
	seed, steps := testutil.SeedAndCount(t, "WEBAPP_CONVERSION_SEED", "WEBAPP_CONVERSION_STEPS", 60)
	t.Logf("seed %d, %d actions (make fuzz-conversion SEED=%d STEPS=%d)", seed, steps, seed, steps)
	fmt.Printf("conversion action test: seed %d, %d actions\n", seed, steps)
	ns := newNamespace(t)
	op := startOperator(t, ns, time.Second)
	g := gen.New(seed)
	rng := rand.New(rand.NewPCG(seed, seed+1))
	const actionsPerApp = 6
	var cases []*convCase
	for i := 0; i*actionsPerApp < steps; i++ {
		c := newConvCase(t, g, rng, ns, fmt.Sprintf("conv-%d", i))
		cases = append(cases, c)
		for range min(actionsPerApp, steps-i*actionsPerApp) {
			a := v1Actions[rng.IntN(len(v1Actions))]
			if !c.act(a) {
				t.Fatalf("seed %d: replay:\n%s", seed, c.replay())
			}
		}
	}

	// The operator settles, then writes nothing at rest and after a restart.
	for _, c := range cases {
		if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			app := &webappv2.WebApp{}
			if err := get(ctx, ns, c.name, app); err != nil {
				return false, err
			}
			return app.Status.ObservedGeneration == app.Generation, nil
		}); err != nil {
			t.Fatalf("seed %d: %s: the operator did not observe the last generation: %v\nreplay:\n%s", seed, c.name, err, c.replay())
		}
	}
	// A WebApp whose Deployment the API refuses (the generator draws some) gets one more try after a restart.
	refused := map[string]bool{}
	for _, c := range cases {
		app := &webappv2.WebApp{}
		if err := get(context.Background(), ns, c.name, app); err != nil {
			t.Fatal(err)
		}
		if ready := meta.FindStatusCondition(app.Status.Conditions, webappv2.ConditionReady); ready != nil && ready.Reason == "InvalidChild" {
			refused[c.name] = true
		}
	}
	waitResyncs(t, 1, 30*time.Second)
	op.writes.take()
	rest := time.Now()
	waitResyncs(t, 3, 30*time.Second)
	failIfWrites(t, fmt.Sprintf("seed %d: at rest after the v1 actions", seed), op.writes.take(), eventsSince(t, ns, rest), nil, nil)
	op.stop()
	restart := time.Now()
	second := startOperator(t, ns, time.Second)
	waitResyncs(t, 3, 30*time.Second)
	failIfWrites(t, fmt.Sprintf("seed %d: after a restart", seed), second.writes.take(), eventsSince(t, ns, restart), nil, refused)
}

func newConvCase(t *testing.T, g *gen.Gen, rng *rand.Rand, ns, name string) *convCase {
	t.Helper()
	hub, _ := g.WebAppV2(ns, name)
	// Annotations near the API's limit, sometimes, beside what v2 alone says.
	if rng.IntN(8) == 0 {
		if hub.Annotations == nil {
			hub.Annotations = map[string]string{}
		}
		hub.Annotations["bulk"] = strings.Repeat("y", 250*1000)
	}
	manifest, err := yaml.Marshal(hub)
	if err != nil {
		t.Fatal(err)
	}
	c := &convCase{t: t, rng: rng, g: g, ns: ns, name: name, create: string(manifest), owners: map[string]bool{"author": true}}
	if err := k8s.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(toUnstructured(t, hub)), client.FieldOwner("author")); err != nil {
		t.Fatalf("the generator drew a WebApp the API server refuses: %v\n%s", err, manifest)
	}
	stored := &webappv2.WebApp{}
	if err := get(context.Background(), ns, name, stored); err != nil {
		t.Fatal(err)
	}
	c.want = stored.Spec
	return c
}

func toUnstructured(t *testing.T, hub *webappv2.WebApp) *unstructured.Unstructured {
	t.Helper()
	raw, err := json.Marshal(hub)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(raw, &u.Object); err != nil {
		t.Fatal(err)
	}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	return u
}

// act does a, then checks every promise; false when one failed (the test has said which).
func (c *convCase) act(a v1Action) bool {
	t := c.t
	before := &webappv2.WebApp{}
	if err := get(context.Background(), c.ns, c.name, before); err != nil {
		t.Errorf("%s: reading as v2 before %q: %v", c.name, a.name, err)
		return false
	}
	replay, err := a.do(c)
	c.steps = append(c.steps, "# "+a.name+"\n"+replay)
	if err != nil {
		t.Errorf("%s: %s: %v", c.name, a.name, err)
		return false
	}
	for _, m := range []string{"v1-editor", "kubectl-label", "kubectl-annotate", "exporter", "gitops-v1", "forger", "big", "v2-applier"} {
		if strings.Contains(replay, "--field-manager="+m) {
			c.owners[m] = true
		}
	}
	after := &webappv2.WebApp{}
	if err := get(context.Background(), c.ns, c.name, after); err != nil {
		t.Errorf("%s: reading as v2 after %q: %v", c.name, a.name, err)
		return false
	}
	ok := true
	fail := func(format string, args ...any) {
		t.Errorf("%s: after %q: "+format, append([]any{c.name, a.name}, args...)...)
		ok = false
	}
	// The v2 spec is what the action meant, and nothing else.
	if !apiequality.Semantic.DeepEqual(c.want, after.Spec) {
		got, _ := yaml.Marshal(after.Spec)
		want, _ := yaml.Marshal(c.want)
		fail("the v2 spec is\n%s\nwant\n%s", got, want)
	}
	// The generation moves only with the spec.
	if apiequality.Semantic.DeepEqual(before.Spec, after.Spec) && after.Generation != before.Generation {
		fail("the generation moved from %d to %d with the spec unchanged", before.Generation, after.Generation)
	}
	// Nothing of the conversion is stored.
	if _, has := after.Annotations[conversion.LegacyDataAnnotation]; has {
		fail("the conversion-data annotation was stored")
	}
	// A v1 write reports what it dropped, and only a forged one drops anything; a v2 write leaves the report.
	switch {
	case strings.HasPrefix(a.name, "v2 "):
		if !apiequality.Semantic.DeepEqual(before.Status.ConversionDropped, after.Status.ConversionDropped) {
			fail("a v2 write changed status.conversionDropped from %+v to %+v", before.Status.ConversionDropped, after.Status.ConversionDropped)
		}
	case !strings.Contains(a.name, "forged") && after.Status.ConversionDropped != nil:
		fail("conversion dropped %+v", after.Status.ConversionDropped)
	}
	// Every read and list in both versions succeeds.
	for _, obj := range []client.Object{&webappv1.WebApp{}, &webappv2.WebApp{}} {
		if err := get(context.Background(), c.ns, c.name, obj); err != nil {
			fail("a %T read fails: %v", obj, err)
		}
	}
	for _, list := range []client.ObjectList{&webappv1.WebAppList{}, &webappv2.WebAppList{}} {
		if err := k8s.List(context.Background(), list, client.InNamespace(c.ns)); err != nil {
			fail("a %T list fails: %v", list, err)
		}
	}
	// No manager owns a field it did not set: the patchers own only their metadata, nobody owns the conversion
	// data, and only the operator owns status.
	for _, e := range after.ManagedFields {
		if e.FieldsV1 == nil {
			continue
		}
		fields := e.FieldsV1.GetRawString()
		switch {
		case e.Manager != "webapp-operator" && !c.owners[e.Manager]:
			fail("an unknown manager %q owns %s", e.Manager, fields)
		case strings.Contains(fields, "f:conversionData") || strings.Contains(fields, "f:conversionDropped"):
			fail("%s owns the conversion's status: %s", e.Manager, fields)
		case e.Manager != "forger" && strings.Contains(fields, conversion.LegacyDataAnnotation):
			// Only the forger sent the annotation (it owns it, on a v1 object where it is never stored).
			fail("%s owns the conversion-data annotation: %s", e.Manager, fields)
		case e.Manager != "webapp-operator" && strings.Contains(fields, `"f:status"`):
			fail("%s owns status: %s", e.Manager, fields)
		case slices.Contains([]string{"kubectl-label", "kubectl-annotate", "forger", "big"}, e.Manager) && strings.Contains(fields, `"f:spec"`):
			fail("%s, which patched metadata only, owns spec fields: %s", e.Manager, fields)
		}
	}
	return ok
}

func (c *convCase) mergePatch(manager string, patch map[string]any) error {
	return c.patch(&webappv1.WebApp{}, manager, patch)
}

func (c *convCase) mergePatchV2(manager string, patch map[string]any) error {
	return c.patch(&webappv2.WebApp{}, manager, patch)
}

func (c *convCase) patch(obj client.Object, manager string, patch map[string]any) error {
	raw, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	obj.SetNamespace(c.ns)
	obj.SetName(c.name)
	err = k8s.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, raw), client.FieldOwner(manager))
	if apierrors.IsInvalid(err) && strings.Contains(err.Error(), "metadata.annotations: Too long") {
		// Beside annotations already at the limit: refused, as it must be, and nothing changed (checked after).
		return nil
	}
	return err
}

// forgedData is conversion data as a forger writes it: ones v2 refuses, or, with valid, valid v2 fields too.
func (c *convCase) forgedData(valid bool) string {
	n := 4
	if valid {
		n = 6
	}
	switch c.rng.IntN(n) {
	case 0:
		return `{"expose":{"hosts":["a.example.com","a.example.com"],"gateway":{"name":"public"}}}`
	case 1:
		return `{"ports":[{"name":"http","port":80},{"name":"x","port":70000}],"autoscaling":{"maxReplicas":1000}}`
	case 2:
		return `{"expose":{"hosts":["10.0.0.1"],"paths":["//x/../y"],"ingress":{"className":"x"}}}`
	case 3:
		return "not json"
	case 4:
		return `{"replicasUnset":true,"unset":["podSecurity","service.type"]}`
	default:
		raw, _ := json.Marshal(map[string]any{"autoscaling": c.g.Autoscaling(), "expose": c.g.Expose()})
		return string(raw)
	}
}

// replay is the case as commands: its creation, then every action.
func (c *convCase) replay() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kubectl create namespace %s\nkubectl -n %s apply --server-side --field-manager=author -f - <<'EOF'\n%sEOF\n", c.ns, c.ns, c.create)
	for _, s := range c.steps {
		b.WriteString(s + "\n")
	}
	return b.String()
}
