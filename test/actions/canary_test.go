package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/test/testutil"
)

// The canary (v2 spec.rollout.canary) in the actions test: some WebApps get a strategy with random steps and, maybe,
// a check whose Prometheus is a server in this process answering what the check's address asks for; image changes
// then start canaries, which other actors meet in every phase: edits and deletions of the stable and canary
// Deployments and of the stable version's record, plan changes, deletions of the WebApp under both policies.

var (
	ingressKind            = kind{"Ingress", "ingress", schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}, "networking.k8s.io/v1"}
	controllerRevisionKind = kind{"ControllerRevision", "controllerrevision", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "controllerrevisions"}, "apps/v1"}
)

// canaryName and recordName name a WebApp's canary objects (the canary's Deployment and, behind a Gateway route, its
// Service) and the stable version's record (controller/stable_record.go).
func canaryName(name string) string  { return name + "-canary" }
func previewName(name string) string { return name + "-canary" } // a blue/green's preview route or Ingress
func recordName(name string) string  { return name + "-stable" }

// promAnswers are the answers the test's Prometheus gives, by the first segment of the check's address path: a
// passing number, a failing one (the checks' max is 0.5), no number, an error page, a hang past the operator's 5 s
// bound, and an answer of 8 MiB (twice the operator's read bound) whose value would pass.
var promAnswers = []string{"pass", "pass", "fail", "nan", "neginf", "html", "hang", "huge"}

// promURL is the test's Prometheus; a check's address is promURL/<answer>.
var promURL string

// startPrometheus starts the test's Prometheus until the test ends.
func startPrometheus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		scalar := func(v string) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"status":"success","data":{"resultType":"scalar","result":[1,%q]}}`, v)
		}
		if r.Method == http.MethodPost {
			// A webhook check (webappv2.WebhookCheck): the same answers in a webhook's form.
			scalar = func(v string) {
				w.Header().Set("Content-Type", "application/json")
				switch v {
				case "NaN":
					_, _ = io.WriteString(w, `{"value": null}`)
				case "-Inf":
					_, _ = io.WriteString(w, `{"value": -1e999}`)
				default:
					_, _ = fmt.Fprintf(w, `{"value": %s}`, v)
				}
			}
		}
		switch answer {
		case "pass":
			scalar("0")
		case "fail":
			scalar("1")
		case "nan":
			scalar("NaN")
		case "neginf":
			scalar("-Inf")
		case "html":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, "<html><body>502 Bad Gateway</body></html>")
		case "hang":
			select {
			case <-r.Context().Done():
			case <-time.After(6 * time.Second):
				scalar("0")
			}
		case "huge":
			w.Header().Set("Content-Type", "application/json")
			testutil.WriteHugeCheckAnswer(w, 8)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	promURL = srv.URL
}

// randomPlan draws a canary strategy: 1 to 3 steps of increasing weights (1..99) pausing 0 to 5 s, some gated for
// up to 5 s, or sometimes a blue/green (switched by the route, or by the Service without one); in half of them a
// check of the test's Prometheus, evaluated every second, with what no value counts as (onNoData) and, for a
// blue/green, maybe the part it gates (during).
func (s *seq) randomPlan(routed, previewable bool) map[string]any {
	plan := map[string]any{}
	if s.blueGreens == 0 || s.chance(0.4) {
		// A blue/green instead of steps (with autoscaling too: the switch holds the HPA's floor): the first one of a
		// sequence, and some of the others.
		s.blueGreens++
		plan["blueGreen"] = s.blueGreen(previewable)
	} else {
		plan["steps"] = s.randomSteps(routed)
	}
	s.planExtras(plan, routed)
	return plan
}

// blueGreen draws a blue/green: a preview and a keep of 0 to 3 s, maybe a gate (with a timeout, as a step's),
// when exposed (previewable: through a Gateway or an Ingress) a preview host, and maybe a smaller preview.
func (s *seq) blueGreen(previewable bool) map[string]any {
	bg := map[string]any{"previewSeconds": int64(s.rng.IntN(4)), "keepSeconds": int64(s.rng.IntN(4))}
	if s.chance(0.3) {
		bg["gate"] = s.gate()
	}
	if previewable && s.chance(0.5) {
		bg["previewHost"] = "preview.example.com"
	}
	if s.chance(0.4) {
		// A smaller preview: scaled to full size before the switch, which waits for every pod.
		bg["previewPercent"] = int64(1 + s.rng.IntN(99))
	}
	return bg
}

// gate draws a gate, always with a timeout here (a few seconds, rolling back or going on), so the canary comes to
// rest on its own; a person (actPersonActs) may promote or abort it before.
func (s *seq) gate() map[string]any {
	gate := map[string]any{"timeoutSeconds": int64(1 + s.rng.IntN(5))}
	if on := pick(s, "", "RollBack", "Promote"); on != "" {
		gate["onTimeout"] = on
	}
	return gate
}

// randomSteps draws 1 to 3 steps of increasing weights (1..99), each pausing 0 to 5 s, some gated, and behind a
// route some routing by request.
func (s *seq) randomSteps(routed bool) []any {
	n := 1 + s.rng.IntN(3)
	weights := map[int]bool{}
	for len(weights) < n {
		weights[1+s.rng.IntN(99)] = true
	}
	var ws []int
	for w := range weights {
		ws = append(ws, w)
	}
	slices.Sort(ws)
	var steps []any
	for _, w := range ws {
		step := map[string]any{"weight": int64(w), "pauseSeconds": int64(s.rng.IntN(6))}
		if s.chance(0.3) {
			step["gate"] = s.gate()
		}
		if routed {
			s.routeByRequest(step, len(steps) == 0)
		}
		steps = append(steps, step)
	}
	return steps
}

// planExtras gives plan, maybe, a rollback window (behind a route or with a blue/green, the version before kept
// warm through it) and a check.
func (s *seq) planExtras(plan map[string]any, routed bool) {
	routed = routed || plan["blueGreen"] != nil
	switch {
	case routed && s.keptWarm == 0:
		// The first plan behind a route: a window the sequence does not outlast, the version before kept warm
		// through it (the way back sends its pods all the traffic at once).
		s.keptWarm++
		plan["rollbackWindowSeconds"], plan["keepPreviousWarm"] = int64(600), true
	case s.chance(0.4):
		// A rollback window: a spec set back to the version a promotion replaced is stable at once, no canary.
		plan["rollbackWindowSeconds"] = pick(s, int64(5), int64(600))
		if routed && s.chance(0.5) {
			// Its pods kept warm meanwhile.
			s.keptWarm++
			plan["keepPreviousWarm"] = true
		}
	}
	if s.chance(0.3) {
		// How long a canary's pods stay after the traffic left them (invariant 12 measures it after a switch).
		plan["retireSeconds"] = int64(2 + s.rng.IntN(4))
	}
	if s.chance(0.5) {
		plan["checkIntervalSeconds"] = int64(1)
		check := map[string]any{"name": "errors", "max": "0.5", "failuresAllowed": int64(s.rng.IntN(2))}
		// A Prometheus query, or a webhook (the same server, answering a POST in a webhook's form).
		if address := promURL + "/" + pick(s, promAnswers...); s.chance(0.5) {
			check["prometheus"] = map[string]any{"address": address, "query": "vector(0)"}
		} else {
			check["webhook"] = map[string]any{"url": address}
			if s.chance(0.4) {
				// A header from a Secret: one that exists (the server ignores headers), or one that does not
				// (the check then fails, naming it).
				check["webhook"].(map[string]any)["headers"] = []any{map[string]any{"name": "Authorization",
					"secretKeyRef": map[string]any{"name": pick(s, "judge-token", "missing-token"), "key": "token"}}}
			}
		}
		// What no value (the "nan" answer) counts as: failed, passed, or waited for at most a few seconds (the step
		// holds, then fails), so a wait never keeps the canary from rest for longer than the test waits.
		switch noData := pick(s, "", "Fail", "Pass", "Wait"); noData {
		case "":
		case "Wait":
			// Always bounded here: the default bound (300 s) would outlast the wait for rest.
			check["onNoData"], check["noDataWaitSeconds"] = noData, int64(1+s.rng.IntN(5))
		default:
			check["onNoData"] = noData
		}
		if _, bg := plan["blueGreen"]; bg && s.chance(0.4) {
			// A blue/green's check of its preview alone, or of its keep alone.
			check["during"] = pick(s, "Preview", "Keep")
		}
		plan["checks"] = []any{check}
	}
}

// routeByRequest gives a step behind a route, maybe, matches (a header, exact or by a regular expression, or a
// cookie) and a mirror; the first step may then have weight 0 (only there, so the weights still increase).
func (s *seq) routeByRequest(step map[string]any, first bool) {
	if s.chance(0.3) {
		var m map[string]any
		switch pick(s, "exact", "regexp", "cookie") {
		case "exact":
			m = map[string]any{"headers": []any{map[string]any{"name": "X-Canary", "value": "always"}}}
		case "regexp":
			m = map[string]any{"headers": []any{map[string]any{"name": "User-Agent", "value": ".*Firefox.*", "type": "RegularExpression"}}}
		default:
			m = map[string]any{"cookie": map[string]any{"name": "canary", "value": "yes"}}
		}
		step["matches"] = []any{m}
	}
	if s.chance(0.2) {
		step["mirrorPercent"] = int64(1 + s.rng.IntN(100))
	}
	if _, m := step["matches"]; first && (m || step["mirrorPercent"] != nil) && s.chance(0.5) {
		step["weight"] = int64(0)
	}
}

// routesByRequest: plan has a step with matches or a mirror, a blue/green's preview host, or steps that keep the
// version before warm (the API refuses each without spec.expose.gateway).
func routesByRequest(plan map[string]any) bool {
	if bg, ok := plan["blueGreen"].(map[string]any); ok {
		return bg["previewHost"] != nil
	}
	if plan["keepPreviousWarm"] == true {
		return true
	}
	steps, _ := plan["steps"].([]any)
	return slices.ContainsFunc(steps, func(st any) bool {
		m := st.(map[string]any)
		return m["matches"] != nil || m["mirrorPercent"] != nil
	})
}

// changedPlan is plan with one step added, one removed, or one weight changed, the weights still increasing; a
// blue/green's keep or preview host changed.
func (s *seq) changedPlan(plan map[string]any, previewable bool) (map[string]any, string) {
	out := map[string]any{}
	for k, v := range plan {
		out[k] = v
	}
	if bg, ok := plan["blueGreen"].(map[string]any); ok {
		// A blue/green: its keep or preview changed, or its preview host set or taken away.
		bg = maps.Clone(bg)
		out["blueGreen"] = bg
		switch {
		case s.chance(0.4) && bg["previewHost"] != nil:
			delete(bg, "previewHost")
			return out, "remove the blue/green's preview host"
		case previewable && s.chance(0.4):
			bg["previewHost"] = pick(s, "preview.example.com", "next.example.com")
			return out, fmt.Sprintf("set the blue/green's preview host to %s", bg["previewHost"])
		default:
			bg["keepSeconds"] = int64(s.rng.IntN(4))
			return out, fmt.Sprintf("set the blue/green's keepSeconds to %d", bg["keepSeconds"])
		}
	}
	steps := slices.Clone(plan["steps"].([]any))
	weight := func(i int) int64 { return steps[i].(map[string]any)["weight"].(int64) }
	switch i := s.rng.IntN(len(steps)); {
	case s.chance(0.35) && len(steps) > 1:
		steps = slices.Delete(steps, i, i+1)
		out["steps"] = steps
		return out, fmt.Sprintf("remove step %d", i)
	case s.chance(0.5) && len(steps) < 10 && weight(len(steps)-1) < 99:
		last := weight(len(steps) - 1)
		steps = append(steps, map[string]any{"weight": last + 1 + s.rng.Int64N(99-last), "pauseSeconds": int64(s.rng.IntN(6))})
		out["steps"] = steps
		return out, "add a last step"
	default:
		lo, hi := int64(1), int64(99)
		if i > 0 {
			lo = weight(i-1) + 1
		}
		if i < len(steps)-1 {
			hi = weight(i+1) - 1
		}
		if hi < lo {
			// A first step of weight 0 (it has matches or a mirror) before one of weight 1: it stays at 0.
			lo = hi
		}
		st := map[string]any{}
		for k, v := range steps[i].(map[string]any) {
			st[k] = v
		}
		st["weight"] = lo + s.rng.Int64N(hi-lo+1)
		steps[i] = st
		out["steps"] = steps
		return out, fmt.Sprintf("set step %d's weight to %d", i, st["weight"])
	}
}

// actSetCanary gives a live WebApp a canary strategy, changes its plan (a step added or removed, a weight changed)
// in whatever phase the canary is, or removes it, as another client (field manager "release") through v2.
func (s *seq) actSetCanary(a *app) bool {
	if a.state != alive || unschedulable(a.spec) {
		// A canary whose pods wait for a node rolls back only after a minute: longer than the test waits for rest.
		return false
	}
	s.setCanary(a)
	return true
}

func (s *seq) setCanary(a *app) {
	var plan map[string]any
	what := "give WebApp %s a canary strategy"
	switch {
	case a.plan != nil && s.chance(0.2):
		what = "remove the canary strategy of WebApp %s"
	case a.plan != nil && s.chance(0.7):
		var change string
		plan, change = s.changedPlan(a.plan, a.exposed || a.ingress)
		what = "change the canary plan of WebApp %s: " + change
	default:
		plan = s.randomPlan(a.exposed, a.exposed || a.ingress)
		if plan["blueGreen"] != nil {
			what = "give WebApp %s a blue/green strategy"
		}
	}
	what = fmt.Sprintf(what, a.name) + s.phaseNote(a.name)
	sp := map[string]any{}
	if plan != nil {
		sp["rollout"] = map[string]any{"canary": plan}
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": webappv2.GroupVersion.String(), "kind": "WebApp",
		"metadata": map[string]any{"name": a.name}, "spec": sp}}
	s.record(what, s.heredoc("apply --server-side --field-manager=release", u))
	_, err := dyn.Resource(webAppV2GVR).Namespace(s.ns).Apply(context.Background(), a.name, u, metav1.ApplyOptions{FieldManager: "release"})
	if err != nil && plan != nil && (strings.Contains(err.Error(), "a canary has steps or blueGreen, exactly one of them") ||
		strings.Contains(err.Error(), "a check has exactly one of prometheus or webhook")) {
		// A v1 client's write co-owns the plan's other kind (steps or blueGreen, a check's prometheus or webhook)
		// through the conversion, so the apply that leaves it out keeps it, and the API refuses both (docs/api.md,
		// "Known gap"): the plan is set by a JSON merge patch that takes the other kind out (and replaces the
		// checks whole), as spec.expose is removed.
		merged := maps.Clone(plan)
		// (Every field a plan may have that this one has not, so the plan is this one exactly.)
		for _, k := range []string{"steps", "blueGreen", "checks", "checkIntervalSeconds", "rollbackWindowSeconds", "keepPreviousWarm", "retireSeconds"} {
			if _, ok := merged[k]; !ok {
				merged[k] = nil
			}
		}
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"rollout": map[string]any{"canary": merged}}})
		s.note("refused (the v1 client co-owns the other kind): %v; set by a merge patch instead", err)
		last := &s.steps[len(s.steps)-1]
		last.cmds = append(last.cmds, fmt.Sprintf("kubectl -n %s patch webapps.v2.example.com/%s --type=merge --field-manager=release -p '%s'", s.ns, a.name, patch))
		_, err = dyn.Resource(webAppV2GVR).Namespace(s.ns).Patch(context.Background(), a.name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "release"})
	}
	if err != nil {
		s.fail("applying the canary strategy to WebApp %s: %v", a.name, err)
	}
	s.recordWrite(a, "")
	a.plan = plan
	if r, ok := plan["retireSeconds"].(int64); ok {
		// The shortest retire any of its plans asked for: what invariant 12 holds its pods to.
		a.minRetire = min(a.retireAtLeast(), time.Duration(r)*time.Second)
	}
}

// phaseNote is where WebApp name's canary is, for a step's title.
func (s *seq) phaseNote(name string) string {
	app := &webappv2.WebApp{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: s.ns, Name: name}, app); err != nil || app.Status.Canary == nil {
		return ""
	}
	c := app.Status.Canary
	return fmt.Sprintf(" (canary %s, step %d, weight %d)", c.Phase, c.Step, c.Weight)
}

// objectRef is one of the objects a canary strategy adds, or the stable Deployment it holds.
type objectRef struct {
	k    kind
	name string
	role string
}

// actEditCanaryObject edits or deletes, in whatever phase the canary is, the stable Deployment (`kubectl set
// image`: an Update under another field manager, which takes the field from ours), the canary's Deployment, the
// stable or the canary's Service (`kubectl set selector`), the route (`kubectl edit` of its weights), or the stable
// version's record (`kubectl annotate` of its revision).
func (s *seq) actEditCanaryObject(a *app) bool {
	if a.state != alive || a.plan == nil {
		return false
	}
	if s.chance(0.5) && !unschedulable(a.spec) && s.startedCanary(a) && s.chance(0.5) {
		// Half the time mid-canary, whatever the chance that a canary runs when drawn; then half the time once
		// the canary gets traffic (its pods ready: a step's weight, or promoting).
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			if v2 := s.getV2(a.name); v2 == nil || v2.Status.Canary == nil || v2.Status.Canary.Weight > 0 || v2.Status.Canary.Phase != "Canary" {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	var present []objectRef
	for _, o := range []objectRef{{deploymentKind, a.name, "stable Deployment"}, {deploymentKind, canaryName(a.name), "canary Deployment"},
		{serviceKind, a.name, "stable Service"}, {serviceKind, canaryName(a.name), "canary Service"}, {httpRouteKind, a.name, "route"},
		{httpRouteKind, previewName(a.name), "preview route"}, {ingressKind, previewName(a.name), "preview Ingress"},
		{controllerRevisionKind, recordName(a.name), "stable version's record"}} {
		if o.k == httpRouteKind && !httpRouteServed() {
			continue
		}
		if u := s.get(o.k, o.name); u != nil && controlledByAWebApp(u) {
			present = append(present, o)
		}
	}
	if len(present) == 0 {
		return false
	}
	o := pick(s, present...)
	if i := slices.IndexFunc(present, func(o objectRef) bool { return o.k == httpRouteKind }); i >= 0 && s.chance(0.3) {
		// The route carries the canary's traffic: drawn more often than its share.
		o = present[i]
	}
	phase := s.phaseNote(a.name)
	if s.chance(0.4) {
		s.record(fmt.Sprintf("delete the %s %s%s", o.role, o.name, phase), fmt.Sprintf("kubectl -n %s delete %s/%s --wait=false", s.ns, o.k.short, o.name))
		s.deleteNamed(a, o.k, o.name)
		return true
	}
	var cmd string
	var edit func(*unstructured.Unstructured)
	switch o.k {
	case deploymentKind:
		image := pick(s, "evil:1", "evil:2")
		cmd = fmt.Sprintf("kubectl -n %s set image deployment/%s app=%s", s.ns, o.name, image)
		edit = func(u *unstructured.Unstructured) {
			cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			for i := range cs {
				if c := cs[i].(map[string]any); c["name"] == "app" {
					c["image"] = image
				}
			}
			_ = unstructured.SetNestedSlice(u.Object, cs, "spec", "template", "spec", "containers")
		}
	case serviceKind:
		cmd = fmt.Sprintf("kubectl -n %s set selector service/%s app.kubernetes.io/name=evil", s.ns, o.name)
		edit = func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedStringMap(u.Object, map[string]string{webappv2.LabelName: "evil"}, "spec", "selector")
		}
	case httpRouteKind:
		var c string
		c, edit = editRoute(o.name)
		cmd = strings.Replace(c, "NS", s.ns, 1)
	case ingressKind:
		// The preview host sent to the stable Service: another client's Update, which takes the backend from our
		// field manager.
		cmd = fmt.Sprintf("kubectl -n %s edit ingress/%s   # the preview host to Service %s", s.ns, o.name, a.name)
		edit = func(u *unstructured.Unstructured) {
			rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
			for i := range rules {
				paths, _, _ := unstructured.NestedSlice(rules[i].(map[string]any), "http", "paths")
				for j := range paths {
					_ = unstructured.SetNestedField(paths[j].(map[string]any), a.name, "backend", "service", "name")
				}
				_ = unstructured.SetNestedSlice(rules[i].(map[string]any), paths, "http", "paths")
			}
			_ = unstructured.SetNestedSlice(u.Object, rules, "spec", "rules")
		}
	default:
		cmd = fmt.Sprintf("kubectl -n %s annotate --overwrite controllerrevision/%s %s=edited", s.ns, o.name, webappv2.AnnotationRevision)
		edit = func(u *unstructured.Unstructured) {
			ann := u.GetAnnotations()
			if ann == nil {
				ann = map[string]string{}
			}
			ann[webappv2.AnnotationRevision] = "edited"
			u.SetAnnotations(ann)
		}
	}
	s.record(fmt.Sprintf("edit the %s %s%s", o.role, o.name, phase), cmd)
	manager := "kubectl-set"
	switch o.k {
	case controllerRevisionKind:
		manager = "kubectl-annotate"
	case httpRouteKind:
		manager = "kubectl-edit"
	}
	for attempt := 0; ; attempt++ {
		u := s.get(o.k, o.name)
		if u == nil {
			s.note("%s %s was gone meanwhile", o.k.name, o.name)
			return true
		}
		edit(u)
		_, err := dyn.Resource(o.k.gvr).Namespace(s.ns).Update(context.Background(), u, metav1.UpdateOptions{FieldManager: manager})
		switch {
		case err == nil:
			return true
		case apierrors.IsConflict(err) && attempt < 10:
			continue
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsInvalid(err):
			s.note("refused: %v", err)
			return true
		default:
			s.fail("editing %s %s: %v", o.k.name, o.name, err)
		}
	}
}

// midCanary reports whether WebApp a's canary runs (its Deployment exists, or the status says Canary or Promoting).
func (s *seq) midCanary(a *app) bool {
	v2 := s.getV2(a.name)
	return s.get(deploymentKind, canaryName(a.name)) != nil ||
		(v2 != nil && v2.Status.Canary != nil && (v2.Status.Canary.Phase == "Canary" || v2.Status.Canary.Phase == "Promoting"))
}

// startedCanary makes sure WebApp a's canary runs: when none does, a new version (a step of its own), then a poll
// until it runs; false when none started within 10 s (a version the Deployment API refuses starts no canary
// Deployment).
func (s *seq) startedCanary(a *app) bool {
	if s.midCanary(a) {
		return true
	}
	s.actStartCanary(a)
	deadline := time.Now().Add(10 * time.Second)
	for !s.midCanary(a) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// actDeleteMidCanary deletes a WebApp whose canary runs (or was just rolled back), under its policy or after
// switching it, sometimes with the canary's Deployment in the same command.
func (s *seq) actDeleteMidCanary(a *app) bool {
	if a.state != alive || (a.plan == nil && unschedulable(a.spec)) {
		return false
	}
	if a.plan == nil {
		// No strategy: one first (a step of its own).
		s.setCanary(a)
		if a.plan == nil {
			return true
		}
	}
	// A new version first when none runs, so deletions mid-canary are drawn as often as their weight says, not only
	// when a canary happens to be under way.
	if !s.startedCanary(a) {
		return true
	}
	if s.chance(0.5) {
		s.actSwitchPolicy(a)
	}
	var with *objectRef
	if s.chance(0.3) {
		with = &objectRef{k: deploymentKind, name: canaryName(a.name)}
	}
	phase := s.phaseNote(a.name)
	s.deleteWebApp(a, with)
	s.steps[len(s.steps)-1].what += " mid-canary" + phase
	s.t.Logf("step %d was a deletion mid-canary%s", len(s.steps), phase)
	return true
}

// canaryLeftovers: invariant 7. Once a deleted WebApp is gone and the garbage collector has passed, nothing its
// canary strategy added is left, whatever the policy: no canary Deployment or Service and no stable version's record
// that still names it as owner or that has no controller (an Orphan deletion never releases them), and a route it
// released sends nothing to the canary.
func (s *seq) canaryLeftovers(d *deletion) {
	testutil.Eventually(s.reporting(), convergeTimeout, fmt.Sprintf("invariant 7 (a canary's objects and the stable version's record go with their WebApp, "+
		"whatever the policy): WebApp %s (uid %s, deleted at step %d%s)", d.name, d.uid, d.step, map[bool]string{true: " with the Orphan policy"}[d.release]),
		func(context.Context) error {
			for _, o := range []objectRef{{deploymentKind, canaryName(d.name), ""}, {serviceKind, canaryName(d.name), ""}, {controllerRevisionKind, recordName(d.name), ""},
				{httpRouteKind, previewName(d.name), ""}, {ingressKind, previewName(d.name), ""}} {
				if o.k == httpRouteKind && !httpRouteServed() {
					continue
				}
				u := s.get(o.k, o.name)
				if u == nil || s.ours[u.GetUID()] {
					continue
				}
				if ref := metav1.GetControllerOfNoCopy(u); ref == nil || ref.UID == d.uid {
					return fmt.Errorf("%s %s is left %s:\n%s", o.k.name, o.name, map[bool]string{true: "unowned", false: "owned by the deleted WebApp"}[ref == nil], toYAML(u.Object))
				}
			}
			return s.releasedRouteLeftover(d.name)
		})
}

// canaryConverged says what keeps WebApp a's canary from rest, nil once it is there: no strategy, or the rollout
// ended (Stable, or RolledBack with the canary's pods gone) with no canary Deployment left.
func (s *seq) canaryConverged(ctx context.Context, a *app) error {
	app := &webappv2.WebApp{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: a.name}, app); err != nil {
		return err
	}
	if c := app.Status.Canary; c != nil && c.RetiringRevision != "" {
		// The pods of a canary the spec left (or the strategy taken out) retire for 10 s after the route left them:
		// their end is written, so rest comes after it, whatever else holds the WebApp.
		return fmt.Errorf("WebApp %s: the pods of revision %s retire since %v", a.name, c.RetiringRevision, c.RetiringSince)
	}
	if c := app.Status.Canary; c != nil && c.Phase == "RolledBack" && c.StepStartedAt != nil {
		// The pods of a rolled-back canary (a version the Deployment API refuses, aborted, too: its Service) retire
		// for retireSeconds after the route left them: their end is written, so rest comes after it.
		return fmt.Errorf("WebApp %s: the pods of revision %s, rolled back, retire since %v", a.name, c.FailedRevision, c.StepStartedAt)
	}
	if app.Spec.Rollout.Canary == nil {
		return nil
	}
	if len(s.blocking(a.name)) > 0 || refused(a.spec) || stableUnknown(readyOf(app)) {
		// Ready says why the canary cannot go on (converged checks that it does).
		return nil
	}
	c := app.Status.Canary
	if c == nil {
		return fmt.Errorf("WebApp %s has a canary strategy but no status.canary", a.name)
	}
	if c.Phase != "Stable" && c.Phase != "RolledBack" || c.StepStartedAt != nil {
		return fmt.Errorf("WebApp %s: the canary is %s at step %d, weight %d (since %v): %s", a.name, c.Phase, c.Step, c.Weight, c.StepStartedAt, toYAML(app.Status))
	}
	if u := s.get(deploymentKind, canaryName(a.name)); u != nil {
		if until, ok := keptWarm(app, u); ok && time.Until(until) > keptWarmRest {
			// The version before, kept warm for the rollback window: at rest, until a window's end that no wait for
			// rest reaches (a nearer one is waited for: its end writes).
			return nil
		}
		return fmt.Errorf("WebApp %s: the canary is %s but its Deployment %s is still there (revision %s)", a.name, c.Phase, u.GetName(),
			u.GetAnnotations()[webappv2.AnnotationRevision])
	}
	return nil
}

// keptWarmRest is how far a kept version's window must end for its pods to count as at rest.
const keptWarmRest = time.Minute

// keptWarm reports whether WebApp app's canary Deployment dep holds the version before kept warm
// (spec.rollout.canary.keepPreviousWarm): phase Stable with a rollback window open, dep running previousRevision;
// and until when.
func keptWarm(app *webappv2.WebApp, dep interface{ GetAnnotations() map[string]string }) (time.Time, bool) {
	spec, c := app.Spec.Rollout.Canary, app.Status.Canary
	if spec == nil || !spec.KeepPreviousWarm || c == nil || c.Phase != "Stable" || c.PreviousRevision == "" || c.PreviousUntil == nil ||
		dep.GetAnnotations()[webappv2.AnnotationRevision] != c.PreviousRevision {
		return time.Time{}, false
	}
	return c.PreviousUntil.Time, time.Now().Before(c.PreviousUntil.Time)
}

// stableUnknown reports whether WebApp a's Ready says the stable version's template is lost (its record and our
// fields on its Deployment both gone mid-canary): the operator does not guess it, and waits for the user.
func stableUnknown(ready *metav1.Condition) bool {
	return ready != nil && strings.Contains(ready.Message, "the stable version's pod template is not known")
}

// checkCanaryAtRest: invariant 8, at rest. With a strategy, the stable Deployment runs the version the status
// names (its revision annotation is status.canary.stableRevision, phase Stable, Canary or RolledBack), with the pod
// template the stable version's record holds; and no canary pod runs.
func (s *seq) checkCanaryAtRest(a *app) {
	ctx := context.Background()
	app := &webappv2.WebApp{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: a.name}, app); err != nil {
		s.fail("reading WebApp %s: %v", a.name, err)
	}
	c := app.Status.Canary
	if app.Spec.Rollout.Canary == nil || c == nil || len(s.blocking(a.name)) > 0 || stableUnknown(readyOf(app)) || refused(a.spec) {
		// (A spec the Deployment API refuses: Ready says InvalidChild, and the Deployment keeps what it had.)
		return
	}
	dep := &appsv1.Deployment{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: a.name}, dep); err != nil {
		s.fail("invariant 8 (the stable Deployment runs the version the status names): WebApp %s's canary is %s, but its Deployment: %v", a.name, c.Phase, err)
	}
	if got := dep.Annotations[webappv2.AnnotationRevision]; got != c.StableRevision {
		s.fail("invariant 8 (the stable Deployment runs the version the status names): WebApp %s's canary is %s with stableRevision %s, but its Deployment runs revision %q:\n%s\nThe WebApp:\n%s",
			a.name, c.Phase, c.StableRevision, got, toYAML(dep), toYAML(app))
	}
	record := &appsv1.ControllerRevision{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: recordName(a.name)}, record); err != nil {
		s.fail("invariant 8 (the stable version is the operator's own data): WebApp %s's canary is %s, but its record %s: %v", a.name, c.Phase, recordName(a.name), err)
	}
	warm := &appsv1.Deployment{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: canaryName(a.name)}, warm); err == nil {
		if _, ok := keptWarm(app, warm); ok {
			// The version before kept warm: the record holds its template (the stable Deployment runs the spec's),
			// and its pods are the canary's.
			s.checkKeptWarm(a, app, record, warm)
			return
		}
	}
	if got := record.Annotations[webappv2.AnnotationRevision]; got != c.StableRevision || !controlledBy(record, app.UID) {
		s.fail("invariant 8 (the stable version is the operator's own data): WebApp %s's stableRevision is %s, but its record is of revision %q (controlled by it: %v):\n%s",
			a.name, c.StableRevision, got, controlledBy(record, app.UID), toYAML(record))
	}
	held := &corev1.PodTemplateSpec{}
	if err := json.Unmarshal(record.Data.Raw, held); err != nil {
		s.fail("decoding the record %s: %v", record.Name, err)
	}
	if why := templateDiff(held, &dep.Spec.Template); why != "" {
		s.fail("invariant 8 (the stable Deployment runs the stable version's record): WebApp %s's canary is %s; its Deployment's pod template differs from the record's: %s\nThe record:\n%s\nThe Deployment:\n%s",
			a.name, c.Phase, why, toYAML(record), toYAML(dep))
	}
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(s.ns), client.HasLabels{webappv2.LabelCanaryOf}); err != nil {
		s.fail("listing pods: %v", err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Labels[webappv2.LabelCanaryOf] == a.name {
			s.fail("invariant 8 (no pod runs a version no WebApp tries): at rest, with WebApp %s's canary %s, canary pod %s runs revision %s",
				a.name, c.Phase, p.Name, p.Labels[webappv2.LabelCanaryRevision])
		}
	}
}

func readyOf(app *webappv2.WebApp) *metav1.Condition {
	for i := range app.Status.Conditions {
		if app.Status.Conditions[i].Type == webappv1.ConditionReady {
			return &app.Status.Conditions[i]
		}
	}
	return nil
}

// templateDiff says how have lacks what want holds ("" when it has it all): its labels and annotations, and each
// container's image and env vars. (The server's defaults and what other managers add are not differences.)
func templateDiff(want, have *corev1.PodTemplateSpec) string {
	var diffs []string
	for k, v := range want.Labels {
		if have.Labels[k] != v {
			diffs = append(diffs, fmt.Sprintf("label %s=%q, want %q", k, have.Labels[k], v))
		}
	}
	for k, v := range want.Annotations {
		if have.Annotations[k] != v {
			diffs = append(diffs, fmt.Sprintf("annotation %s=%q, want %q", k, have.Annotations[k], v))
		}
	}
	for _, w := range want.Spec.Containers {
		i := slices.IndexFunc(have.Spec.Containers, func(c corev1.Container) bool { return c.Name == w.Name })
		if i < 0 {
			diffs = append(diffs, "no container "+w.Name)
			continue
		}
		h := have.Spec.Containers[i]
		if h.Image != w.Image {
			diffs = append(diffs, fmt.Sprintf("container %s image %s, want %s", w.Name, h.Image, w.Image))
		}
		for _, e := range w.Env {
			if !slices.ContainsFunc(h.Env, func(x corev1.EnvVar) bool { return x.Name == e.Name && x.Value == e.Value }) {
				diffs = append(diffs, fmt.Sprintf("container %s lacks env %s=%q", w.Name, e.Name, e.Value))
			}
		}
	}
	return strings.Join(diffs, ", ")
}

// reconcileBound bounds how long one reconcile holds a worker: a round of checks is bounded by 5 s, every request
// to the API server by far less.
const reconcileBound = 10.0

// slowReconciles is how many reconciles of the WebApp controller this process has seen, and how many of them held
// their worker longer than reconcileBound seconds.
func slowReconciles(t testing.TB) (total, slow uint64) {
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_time_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == "controller" && l.GetValue() == "webapp" }) {
				continue
			}
			h := m.GetHistogram()
			total += h.GetSampleCount()
			for _, b := range h.GetBucket() {
				if b.GetUpperBound() == reconcileBound {
					slow += h.GetSampleCount() - b.GetCumulativeCount()
				}
			}
		}
	}
	return total, slow
}

// checkWorkersBound: invariant 9. No reconcile of this sequence held its worker longer than reconcileBound.
func (s *seq) checkWorkersBound() {
	total, slow := slowReconciles(s.t)
	if slow > s.slowBefore {
		s.fail("invariant 9 (no worker is held longer than %vs): %d of the %d reconciles of this sequence took longer", reconcileBound, slow-s.slowBefore, total-s.totalBefore)
	}
	s.t.Logf("sequence %d: %d reconciles, none longer than %vs", s.index, total-s.totalBefore, reconcileBound)
}

// getV2 reads WebApp name through v2; nil when there is none.
func (s *seq) getV2(name string) *webappv2.WebApp {
	app := &webappv2.WebApp{}
	switch err := k8s.Get(context.Background(), types.NamespacedName{Namespace: s.ns, Name: name}, app); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		s.fail("reading WebApp %s through v2: %v", name, err)
	}
	return app
}

// actPersonActs is a person's action on a WebApp's canary, as `kubectl webapp promote|abort|retry` (or `kubectl
// annotate`) writes it: the annotation webapp.example.com/action, for where the canary is now (this step, all the
// way, abort, retry) or for somewhere it no longer is (another revision or step, or a value acted on before),
// which must act on nothing.
func (s *seq) actPersonActs(a *app) bool {
	if a.state != alive || a.plan == nil {
		return false
	}
	app := s.getV2(a.name)
	if app == nil || app.Status.Canary == nil {
		return false
	}
	c := app.Status.Canary
	stamp := fmt.Sprint(s.rng.IntN(1000))
	value := pick(s,
		fmt.Sprintf("promote %s/%d at %s", c.CanaryRevision, c.Step, stamp),
		fmt.Sprintf("promote %s/full at %s", c.CanaryRevision, stamp),
		fmt.Sprintf("abort %s at %s", c.CanaryRevision, stamp),
		fmt.Sprintf("retry %s at %s", c.FailedRevision, stamp),
		fmt.Sprintf("promote %s/%d at %s", c.StableRevision, c.Step+1, stamp),
		"retry 0000000000000000",
		c.ActedOn)
	s.act(a, app, value)
	return true
}

// act is a person's action value on WebApp a (app, as read): the annotation, as kubectl annotate writes it.
func (s *seq) act(a *app, app *webappv2.WebApp, value string) {
	s.record(fmt.Sprintf("a person acts on WebApp %s: %q%s", a.name, value, s.phaseNote(a.name)),
		fmt.Sprintf("kubectl -n %s annotate --overwrite --field-manager=kubectl-annotate webapp/%s %s=%q", s.ns, a.name, webappv2.AnnotationAction, value))
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, webappv2.AnnotationAction, value)
	if err := k8s.Patch(context.Background(), app, client.RawPatch(types.MergePatchType, []byte(patch)), client.FieldOwner("kubectl-annotate")); err != nil {
		// Deleted meanwhile: an outcome like any other.
		s.note("refused: %v", err)
	}
}

// actWayBack takes a release kept warm back: WebApp a (its plan keeping the version before warm) gets a new
// image, a person promotes it all the way, and once the promotion is over with the version before kept warm (within
// 40 s), the image is set back to it, as reverting a commit does; its kept pods then take all the traffic at once.
// A release that does not get there (a check fails, another actor's change) is an outcome like any other.
func (s *seq) actWayBack(a *app) bool {
	if a.state != alive || a.plan == nil || a.plan["keepPreviousWarm"] != true || unschedulable(a.spec) || len(s.blocking(a.name)) > 0 {
		// (A foreign object in the way holds every release: none would get to its promotion.)
		return false
	}
	if s.keptImage(a) == "" {
		if !s.startedCanary(a) {
			return true
		}
		if app := s.getV2(a.name); app != nil && app.Status.Canary != nil && app.Status.Canary.CanaryRevision != "" {
			s.act(a, app, fmt.Sprintf("promote %s/full at %d", app.Status.Canary.CanaryRevision, s.rng.IntN(1000)))
		}
		// (A blue/green's preview and switch, each with its warm-up, the promotion's rollout and its retire.)
		deadline := time.Now().Add(40 * time.Second)
		for s.keptImage(a) == "" {
			if time.Now().After(deadline) {
				s.note("the version before was not kept warm within 40 s%s", s.phaseNote(a.name))
				return true
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	kept := s.keptImage(a)
	if kept == a.spec.Image {
		// (It differed in more than its image: no way back by the image alone.)
		return true
	}
	spec := *a.spec.DeepCopy()
	spec.Image = kept
	a.prevImage = a.spec.Image
	s.record(fmt.Sprintf("set the image of WebApp %s back to the one kept warm, %s%s", a.name, kept, s.phaseNote(a.name)))
	s.applySpec(a, spec)
	return true
}

// actStartCanary changes the image of a live WebApp with a canary strategy, as its user applies it (`kubectl set
// image`-like, through the whole spec): a new version, so a canary starts, or replaces the one running.
func (s *seq) actStartCanary(a *app) bool {
	if a.state != alive || a.plan == nil {
		return false
	}
	what := "set the image of WebApp %s to %s%s"
	if s.chance(0.3) && s.trafficSent(a) {
		// Once the route has sent the canary traffic: the spec leaves it, so its pods retire after the route.
		what = "once the route sent its canary traffic, " + what
	}
	spec := *a.spec.DeepCopy()
	images := slices.DeleteFunc([]string{"nginx:1.25", "nginx:1.27", "web:1", "web:2", "web:3"}, func(i string) bool { return i == spec.Image })
	spec.Image = pick(s, images...)
	switch kept := s.keptImage(a); {
	case kept != "" && kept != a.spec.Image && s.chance(0.8):
		// The version before kept warm: set back to its image most often, so the way back to its pods is drawn (a
		// version that differed in more than its image is a new canary).
		what, spec.Image = "set the image of WebApp %s back to the one kept warm, %s%s", kept
	case a.prevImage != "" && a.prevImage != spec.Image && a.prevImage != a.spec.Image && s.chance(0.4):
		// A reverted commit: the image before, which a promotion's rollback window may roll back to at once.
		what, spec.Image = "set the image of WebApp %s back to %s%s", a.prevImage
	}
	a.prevImage = a.spec.Image
	s.record(fmt.Sprintf(what, a.name, spec.Image, s.phaseNote(a.name)))
	s.applySpec(a, spec)
	return true
}

// keptImage is the image of the version WebApp a keeps warm ("": none kept).
func (s *seq) keptImage(a *app) string {
	v2, u := s.getV2(a.name), s.get(deploymentKind, canaryName(a.name))
	if v2 == nil || u == nil {
		return ""
	}
	if _, ok := keptWarm(v2, u); !ok {
		return ""
	}
	containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	if len(containers) == 0 {
		return ""
	}
	image, _, _ := unstructured.NestedString(containers[0].(map[string]any), "image")
	return image
}

// logWaysBack logs how often the sequence's WebApps took the way back to a version kept warm (their RolledBack
// events say so), so a run shows whether its draws reached it.
func (s *seq) logWaysBack() {
	events := &eventsv1.EventList{}
	if err := k8s.List(context.Background(), events, client.InNamespace(s.ns)); err != nil {
		s.fail("listing events: %v", err)
	}
	n := 0
	for _, e := range events.Items {
		if e.Reason == webappv2.ReasonRolledBack && strings.Contains(e.Note, "its pods kept warm") {
			n++
		}
	}
	s.t.Logf("%d plans kept the version before warm; %d ways back to it", s.keptWarm, n)
}

// trafficSent polls, for at most 8 s, until the route has sent WebApp a's running canary traffic (its step's pods
// ready, a later step, or its promotion); false when none runs or it did not come to that (a canary whose pods never
// get ready, a rollback).
func (s *seq) trafficSent(a *app) bool {
	deadline := time.Now().Add(8 * time.Second)
	for {
		v2 := s.getV2(a.name)
		if v2 == nil || v2.Status.Canary == nil || v2.Status.Canary.CanaryRevision == "" {
			return false
		}
		if c := v2.Status.Canary; c.StepStartedAt != nil || c.Step > 0 || c.Phase == "Promoting" {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// judgeToken creates the Secret a webhook check's header may name (judge-token; missing-token never exists).
func (s *seq) judgeToken(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "judge-token"},
		"stringData": map[string]any{"token": "Bearer actions"}}}
	if _, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}).Namespace(s.ns).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Secret judge-token: %v", err)
	}
}

// checkKeptWarm: invariant 8 while the version before is kept warm (keepPreviousWarm). The record holds its pod
// template, the canary Deployment runs that template (its containers: the labels are the canary's), and the only
// canary pods are that version's.
func (s *seq) checkKeptWarm(a *app, app *webappv2.WebApp, record *appsv1.ControllerRevision, warm *appsv1.Deployment) {
	c := app.Status.Canary
	s.t.Logf("at rest, WebApp %s keeps revision %s warm until %s", a.name, c.PreviousRevision, c.PreviousUntil.UTC().Format(time.RFC3339))
	if got := record.Annotations[webappv2.AnnotationRevision]; got != c.PreviousRevision || !controlledBy(record, app.UID) {
		s.fail("invariant 8 (the version kept warm is the operator's own data): WebApp %s keeps revision %s warm, but its record is of revision %q (controlled by it: %v):\n%s",
			a.name, c.PreviousRevision, got, controlledBy(record, app.UID), toYAML(record))
	}
	held := &corev1.PodTemplateSpec{}
	if err := json.Unmarshal(record.Data.Raw, held); err != nil {
		s.fail("decoding the record %s: %v", record.Name, err)
	}
	// (The canary's labels are its own.)
	held.Labels = nil
	if why := templateDiff(held, &warm.Spec.Template); why != "" {
		s.fail("invariant 8 (the version kept warm runs its record): WebApp %s's %s differs from the record of revision %s: %s\nThe record:\n%s\nThe Deployment:\n%s",
			a.name, warm.Name, c.PreviousRevision, why, toYAML(record), toYAML(warm))
	}
	pods := &corev1.PodList{}
	if err := k8s.List(context.Background(), pods, client.InNamespace(s.ns), client.MatchingLabels{webappv2.LabelCanaryOf: a.name}); err != nil {
		s.fail("listing pods: %v", err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Labels[webappv2.LabelCanaryRevision] != c.PreviousRevision {
			s.fail("invariant 8 (no pod runs a version no WebApp tries or keeps): at rest, WebApp %s keeps revision %s warm, but canary pod %s runs revision %s",
				a.name, c.PreviousRevision, p.Name, p.Labels[webappv2.LabelCanaryRevision])
		}
	}
}
