package actions

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/canary"
	"github.com/example/webapp-operator/test/cluster"
	"github.com/example/webapp-operator/test/testutil"
)

const (
	// defaultSteps is the CI budget: WEBAPP_ACTIONS_STEPS when unset (make fuzz-actions STEPS=...).
	defaultSteps = 60
	// stepsPerSequence: every sequence of this many steps runs in a fresh namespace with a fresh operator and ends
	// with the checks at rest, so a long run is many sequences, each with its own replay.
	stepsPerSequence = 20
	// requeue is the operator's resync period: short, so rest is reached and proven quickly.
	requeue = time.Second
	// convergeTimeout bounds how long a WebApp may take to converge (or say why not) once the actors stop.
	convergeTimeout = 60 * time.Second
	// promptStatus bounds how long a new WebApp goes without a Ready condition: its first status is written at
	// once (only progress is paced), whatever happened to a WebApp of the same name before.
	promptStatus = 5 * time.Second
)

// The WebApps of every sequence; two, so one WebApp's events cannot be mistaken for the other's.
var appNames = []string{"a", "b"}

// seedAndSteps reads WEBAPP_ACTIONS_SEED (1 by default) and WEBAPP_ACTIONS_STEPS (defaultSteps).
func seedAndSteps(t *testing.T) (uint64, int) {
	t.Helper()
	return testutil.SeedAndCount(t, "WEBAPP_ACTIONS_SEED", "WEBAPP_ACTIONS_STEPS", defaultSteps)
}

// Other actors act on WebApps and their children in random order while the operator runs, restarts and meets API
// errors; after every step and once they stop, the operator's promises hold: nothing deleted comes back, released
// children survive, nothing foreign is taken over, status claims only what the Deployment got, every WebApp
// converges or says why, and at rest nothing is written.
func TestRandomActionsKeepTheInvariants(t *testing.T) {
	seed, steps := seedAndSteps(t)
	t.Logf("seed %d, %d steps (WEBAPP_ACTIONS_SEED=%d WEBAPP_ACTIONS_STEPS=%d, or make fuzz-actions SEED=%d STEPS=%d)", seed, steps, seed, steps, seed, steps)
	fmt.Printf("action test: seed %d, %d steps\n", seed, steps)
	startPrometheus(t)
	for i := 0; steps > 0; i++ {
		n := min(steps, stepsPerSequence)
		steps -= n
		t.Run(fmt.Sprintf("sequence-%d", i), func(t *testing.T) { runSequence(t, seed, i, n) })
	}
}

// appState is what the test knows of one WebApp name.
type appState int

const (
	absent   appState = iota // never created, or deleted and its deletion checked
	alive                    // created, not deleted
	deleting                 // deleted by the test; not yet seen gone
)

// app is the test's model of one WebApp name.
type app struct {
	name     string
	state    appState
	uid      types.UID
	spec     webappv1.WebAppSpec // the spec last applied, as the server stored it
	sentinel string              // a ConfigMap owned by the WebApp: its deletion shows the garbage collector passed
	exports  map[string]*unstructured.Unstructured
	plan     map[string]any // the canary strategy last applied through v2 (nil: none)
	exposed  bool           // spec.expose.gateway is set (actExpose)
	ingress  bool           // spec.expose.ingress is set (actExpose)
	// minRetire is the shortest retireSeconds of the plans applied to this name (0: none set, canary.Retire).
	minRetire time.Duration
	// prevImage is the image before the last image change (actStartCanary), to set the spec back to it.
	prevImage string
	claim     *claimVol // the claim volume last applied through v2 (nil: none)
	// before are the uids of the WebApps of this name before this one whose deletion released their children
	// (Orphan): the next WebApp of the name takes them up, with the fields our manager still owned on them.
	before []types.UID
}

// deletion is what the test knew when it deleted a WebApp, to check afterwards.
type deletion struct {
	name       string
	sentinel   string
	uid        types.UID
	step       int
	release    bool                 // our finalizer was on it with the Orphan policy: the children must be released
	candidates map[string]types.UID // kind -> child the WebApp controlled then
	replicas   int32
}

// mark is a child a user deleted while its WebApp was gone or being deleted: nothing may bring it back until the
// test itself creates an object of that name or a new WebApp of that name.
type mark struct {
	kind, name string
	uid        types.UID // the object deleted
	step       int
	clearedAt  int64 // resourceVersion from which the test itself re-created the name (0: not yet)
}

// step is one action, as shell commands that replay it.
type step struct {
	n    int
	what string
	cmds []string
}

// seq is one sequence: a namespace, an operator, two WebApp names and the test's record of what it did.
type seq struct {
	t      *testing.T
	seed   uint64
	index  int
	ns     string
	rng    *rand.Rand
	apps   []*app
	steps  []step
	writes *writeLog
	faults atomic.Pointer[fault]
	faultN int // steps left until the fault is removed
	// blueGreens counts the blue/green plans drawn: a sequence's first plan behind a route is one.
	blueGreens int
	// keptWarm counts the plans drawn that keep the version before warm: a sequence's first plan behind a route does.
	keptWarm int
	op       *operator
	hist     *history
	specs    map[types.UID]map[int64]webappv1.WebAppSpec // the spec of every generation of every WebApp
	bounds   map[types.UID]map[int64]*bounds             // and its autoscaling (nil: none)
	// hpasRefused: the quota noHPAs exists.
	hpasRefused bool
	ours        map[types.UID]bool   // objects the test itself created
	foreign     map[types.UID]string // objects the test created without our labels: "Kind/name"
	marks       []*mark
	// deletedByActor are the objects an actor deleted; switchChecked the last canary Deployment's deletion invariant
	// 12 has checked (its resourceVersion).
	deletedByActor map[types.UID]bool
	switchChecked  int64
	claims         map[string]bool // status claims already checked, "uid/condition/generation"
	cursor         int             // WebApp versions checked so far
	stats          struct{ deletions, releases, afterSwitch int }
	pending        []*deletion             // WebApps deleted, not yet checked gone
	created        map[types.UID]time.Time // when each WebApp was created
	shown          map[types.UID]bool      // WebApps that have shown a Ready condition
	// totalBefore and slowBefore are the reconciles this process had seen, and the slow ones, when the sequence began.
	totalBefore, slowBefore uint64
	storage                 *storage // what the test knows of claims (claim_test.go), made on first use
}

func runSequence(t *testing.T, seed uint64, index, steps int) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("actions-%d-%s", index, utilrand.String(4))}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	s := &seq{t: t, seed: seed, index: index, ns: ns.Name, rng: rand.New(rand.NewPCG(seed, uint64(index))),
		writes: &writeLog{}, specs: map[types.UID]map[int64]webappv1.WebAppSpec{}, bounds: map[types.UID]map[int64]*bounds{}, ours: map[types.UID]bool{},
		foreign: map[types.UID]string{}, claims: map[string]bool{}, deletedByActor: map[types.UID]bool{},
		created: map[types.UID]time.Time{}, shown: map[types.UID]bool{}}
	for _, n := range appNames {
		s.apps = append(s.apps, &app{name: n, exports: map[string]*unstructured.Unstructured{}})
	}
	// The Gateway API is served as each sequence begins (actToggleGatewayAPI takes it away now and then), so
	// exposed WebApps' canaries run behind a route.
	if !httpRouteServed() {
		if _, err := envtest.InstallCRDs(lc.Config, envtest.CRDInstallOptions{Paths: []string{gatewayAPICRD(t)}, ErrorIfPathMissing: true}); err != nil {
			t.Fatalf("installing the HTTPRoute CRD: %v", err)
		}
	}
	s.gatewayOfClass(t)
	s.judgeToken(t)
	s.hist = watchHistory(t, s.ns)
	s.hist.createMarkers(t, s.ns)
	s.op = startOperator(t, s.ns, requeue, s.writes, &s.faults)
	t.Cleanup(func() {
		s.op.stop()
		_ = k8s.Delete(context.Background(), ns)
	})
	t.Logf("sequence %d in namespace %s: %d steps", index, s.ns, steps)
	s.totalBefore, s.slowBefore = slowReconciles(t)

	// Both WebApps exist from the start, so the first actions have something to act on.
	for _, a := range s.apps {
		s.createWebApp(a)
		s.check()
	}
	for range steps {
		s.randomStep()
		if s.faultN > 0 {
			if s.faultN--; s.faultN == 0 {
				s.removeFault()
			}
		}
		s.check()
	}
	s.quiesce()
	s.logWaysBack()
	// Deleting what is left proves deletion once more, from rest, under whichever policy each WebApp has.
	for _, a := range s.apps {
		if a.state == alive {
			s.deleteWebApp(a, nil)
		}
	}
	s.waitDeletions()
	s.check()
	s.checkWorkersBound()
	t.Logf("sequence %d checked %d versions of WebApps, %d status claims, %d deletions (%d with released children), %d foreign objects, %d user deletions after a WebApp's, %d canary Deployments deleted after the Service's switch",
		index, s.cursor, len(s.claims), s.stats.deletions, s.stats.releases, len(s.foreign), len(s.marks), s.stats.afterSwitch)
}

// actions are the other actors' moves, with their weights. An action that does not apply to the state drawn
// returns false and another is drawn.
var actions = []struct {
	weight int
	run    func(*seq, *app) bool
}{
	{4, (*seq).actCreateWebApp},
	{14, (*seq).actChangeSpec},
	{5, (*seq).actSwitchPolicy},
	{8, (*seq).actDeleteWebApp},
	{3, (*seq).actReplaceWebApp},
	{10, (*seq).actDeleteChild},
	{5, (*seq).actRecreateFromExport},
	{4, (*seq).actCreateForeign},
	{10, (*seq).actOpsApply},
	{3, (*seq).actInjectFault},
	{4, (*seq).actRestart},
	{10, (*seq).actLetWork},
	{4, (*seq).actV1MetadataEdit},
	{3, (*seq).actV1ApplyExport},
	{3, (*seq).actCreateImpostorPod},
	{2, (*seq).actToggleGatewayAPI},
	{4, (*seq).actAutoscale},
	{2, (*seq).actRefuseHPAs},
	{6, (*seq).actSetCanary},
	{10, (*seq).actStartCanary},
	{16, (*seq).actEditCanaryObject},
	{6, (*seq).actDeleteMidCanary},
	{12, (*seq).actPersonActs},
	{12, (*seq).actWayBack},
	{4, (*seq).actExpose},
	{2, (*seq).actGatewayFeatures},
	{5, (*seq).actStorage},
	{3, (*seq).actCreateForeignClaim},
}

// randomStep draws actions until one applies.
func (s *seq) randomStep() {
	total := 0
	for _, a := range actions {
		total += a.weight
	}
	for range 100 {
		n := s.rng.IntN(total)
		i := 0
		for ; n >= actions[i].weight; i++ {
			n -= actions[i].weight
		}
		if actions[i].run(s, s.apps[s.rng.IntN(len(s.apps))]) {
			return
		}
	}
	s.fail("no action applies to the state: a bug of the test")
}

func (s *seq) chance(p float64) bool { return s.rng.Float64() < p }

func pick[T any](s *seq, options ...T) T { return options[s.rng.IntN(len(options))] }

// record adds a step to the replay.
func (s *seq) record(what string, cmds ...string) {
	s.steps = append(s.steps, step{n: len(s.steps) + 1, what: what, cmds: cmds})
	s.t.Logf("step %d at %s: %s", len(s.steps), time.Now().Format("15:04:05.000"), what)
}

// note adds a line to the last step's replay (what the API server answered, say).
func (s *seq) note(format string, args ...any) {
	last := &s.steps[len(s.steps)-1]
	last.cmds = append(last.cmds, "# "+fmt.Sprintf(format, args...))
}

// retireAtLeast is how long a's canary pods stay at least after the traffic left them: the shortest retireSeconds of
// its plans so far, or canary.Retire.
func (a *app) retireAtLeast() time.Duration {
	if a.minRetire > 0 {
		return a.minRetire
	}
	return canary.Retire
}

// --- the actions ---

// actCreateWebApp creates a WebApp of a name that is free: new, or gone (a new UID).
func (s *seq) actCreateWebApp(a *app) bool {
	if a.state != absent {
		return false
	}
	s.createWebApp(a)
	return true
}

func (s *seq) createWebApp(a *app) {
	spec := s.randomSpec(pick(s, webappv1.DeletionPolicyDelete, webappv1.DeletionPolicyOrphan))
	s.record(fmt.Sprintf("create WebApp %s", a.name))
	u := s.applySpec(a, spec)
	if u == nil {
		return
	}
	a.state, a.uid, a.plan, a.exposed, a.ingress, a.claim, a.prevImage = alive, u.GetUID(), nil, false, false, nil, ""
	s.created[a.uid] = time.Now()
	// A new WebApp of the name may create children of the name again.
	s.clearMarks("", a.name, rv(u))
	s.clearMarks("", canaryName(a.name), rv(u))
	// The sentinel is owned by this WebApp only; once the garbage collector deleted it, it has processed the
	// WebApp's deletion.
	a.sentinel = fmt.Sprintf("%s-sentinel-%s", a.name, utilrand.String(5))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: a.sentinel, OwnerReferences: []metav1.OwnerReference{{
		APIVersion: webappv1.GroupVersion.String(), Kind: "WebApp", Name: a.name, UID: a.uid, BlockOwnerDeletion: ptr.To(false)}}}}
	if err := k8s.Create(context.Background(), cm); err != nil {
		s.fail("creating the sentinel ConfigMap: %v", err)
	}
	s.note("(the test also creates ConfigMap %s owned by webapp/%s uid %s, to see the garbage collector pass)", a.sentinel, a.name, a.uid)
	if s.chance(0.5) {
		// Its canaries then run behind a route, with a Service of their own.
		s.actExpose(a)
	}
	if s.chance(0.6) && !unschedulable(a.spec) {
		// Its next versions reach users as canaries.
		s.setCanary(a)
	}
}

// actChangeSpec changes a live WebApp's spec to another valid one, or to one the Deployment API refuses.
func (s *seq) actChangeSpec(a *app) bool {
	if a.state != alive {
		return false
	}
	spec := s.randomSpec(a.spec.DeletionPolicy)
	if a.plan != nil {
		// A canary whose pods wait for a node rolls back only after a minute: longer than the test waits for rest.
		spec.Resources, spec.ProgressDeadlineSeconds = corev1.ResourceRequirements{}, 0
	}
	if s.chance(0.25) {
		// A user adds a bad pod label to the spec as it is: nothing else changes, so only the refusal can stop
		// the status from claiming the new generation.
		spec = *a.spec.DeepCopy()
		if spec.PodLabels == nil {
			spec.PodLabels = map[string]string{}
		}
		spec.PodLabels["tier"] = "has space"
	}
	s.record(fmt.Sprintf("change the spec of WebApp %s%s", a.name, s.phaseNote(a.name)))
	s.applySpec(a, spec)
	return true
}

// actSwitchPolicy switches a live WebApp between the Delete and Orphan policies.
func (s *seq) actSwitchPolicy(a *app) bool {
	if a.state != alive {
		return false
	}
	spec := *a.spec.DeepCopy()
	spec.DeletionPolicy = webappv1.DeletionPolicyOrphan
	if a.spec.DeletionPolicy == webappv1.DeletionPolicyOrphan {
		spec.DeletionPolicy = webappv1.DeletionPolicyDelete
	}
	s.record(fmt.Sprintf("switch WebApp %s to deletionPolicy %s", a.name, spec.DeletionPolicy))
	s.applySpec(a, spec)
	return true
}

// actDeleteWebApp deletes a live WebApp, sometimes with one of its children in the same command.
func (s *seq) actDeleteWebApp(a *app) bool {
	if a.state != alive {
		return false
	}
	var with *objectRef
	if s.chance(0.5) {
		with = &objectRef{k: pick(s, deploymentKind, deploymentKind, serviceKind, pdbKind), name: a.name}
	}
	s.deleteWebApp(a, with)
	return true
}

// deleteWebApp deletes WebApp a (and the child of kind with, when not nil, right after, as
// `kubectl delete webapp/a deployment/a` does), remembering what must happen to its children.
func (s *seq) deleteWebApp(a *app, with *objectRef) {
	ctx := context.Background()
	args := "webapp/" + a.name
	if with != nil {
		args += " " + with.k.short + "/" + with.name
	}
	s.record(fmt.Sprintf("delete WebApp %s", args), fmt.Sprintf("kubectl -n %s delete %s --wait=false", s.ns, args))
	cur := &webappv1.WebApp{}
	var d *deletion
	for attempt := 0; ; attempt++ {
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: a.name}, cur); err != nil {
			s.fail("reading WebApp %s before deleting it: %v", a.name, err)
		}
		d = &deletion{name: a.name, sentinel: a.sentinel, uid: cur.UID, step: len(s.steps), candidates: map[string]types.UID{}, replicas: maxReplicas(cur.Spec, s.autoscaled(cur.UID, cur.Generation)),
			release: slices.Contains(cur.Finalizers, webappv1.Finalizer) && cur.Spec.DeletionPolicy == webappv1.DeletionPolicyOrphan}
		for _, k := range childKinds {
			if u := s.get(k, a.name); u != nil && controlledBy(u, cur.UID) {
				d.candidates[k.name] = u.GetUID()
			}
		}
		// The preconditions make sure the finalizers and policy read above are those the deletion met.
		err := dyn.Resource(webAppKind.gvr).Namespace(s.ns).Delete(ctx, a.name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &cur.UID, ResourceVersion: &cur.ResourceVersion}})
		if err == nil {
			// (Its children go in any order from now on: invariant 12 leaves them be, whatever its watch has seen.)
			s.deletedByActor[cur.UID] = true
			break
		}
		// The operator changed it since it was read (its finalizer, its status): read it again.
		if !apierrors.IsConflict(err) || attempt == 10 {
			s.fail("deleting WebApp %s: %v", a.name, err)
		}
	}
	s.note("the WebApp had finalizers %v and deletionPolicy %s: its children must be %s", cur.Finalizers, cur.Spec.DeletionPolicy,
		map[bool]string{true: "released", false: "garbage-collected"}[d.release])
	a.state = deleting
	if d.release {
		// Its children are released, to be taken up by the next WebApp of the name with our manager's fields.
		a.before = append(a.before, d.uid)
	}
	s.pending = append(s.pending, d)
	if with != nil {
		s.deleteNamed(a, with.k, with.name)
	}
}

// actReplaceWebApp deletes a live WebApp and creates it again at once (a new UID), as
// `kubectl delete webapp/a && kubectl apply -f a.yaml` does; with a finalizer on it, the deletion takes time and
// only the deletion happens.
func (s *seq) actReplaceWebApp(a *app) bool {
	if a.state != alive {
		return false
	}
	s.deleteWebApp(a, nil)
	if s.get(webAppKind, a.name) != nil {
		s.note("the WebApp is still being deleted: it is not created again now")
		return true
	}
	if d := s.pending[len(s.pending)-1]; d.release {
		// Released children are checked before a new WebApp of the name adopts them (and, at one replica, deletes
		// the PodDisruptionBudget).
		s.settleDeletions()
	}
	a.state = absent
	s.createWebApp(a)
	s.steps[len(s.steps)-1].what += " right after deleting it"
	return true
}

// actDeleteChild deletes the object of a child's name, whoever's it is.
func (s *seq) actDeleteChild(a *app) bool {
	k := pick(s, childKinds...)
	if s.get(k, a.name) == nil {
		return false
	}
	s.record(fmt.Sprintf("delete %s %s", k.name, a.name), fmt.Sprintf("kubectl -n %s delete %s/%s --wait=false", s.ns, k.short, a.name))
	s.deleteNamed(a, k, a.name)
	return true
}

// deleteNamed deletes the object of kind k named name, one of WebApp a's (a child of a's name is exported first,
// as kubectl get -o yaml, to be created again); deleted while the WebApp is gone or being deleted, nothing may bring
// it back.
func (s *seq) deleteNamed(a *app, k kind, name string) {
	u := s.get(k, name)
	if u == nil {
		s.note("%s %s was already gone", k.name, name)
		return
	}
	if name == a.name {
		a.exports[k.name] = export(u)
		s.note("(exported first: kubectl -n %s get %s/%s -o yaml)", s.ns, k.short, name)
	}
	uid := u.GetUID()
	s.deletedByActor[uid] = true
	err := dyn.Resource(k.gvr).Namespace(s.ns).Delete(context.Background(), name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		s.note("%s %s was gone or replaced meanwhile: %v", k.name, name, err)
		return
	case err != nil:
		s.fail("deleting %s %s: %v", k.name, name, err)
	}
	if a.state != alive && k != controllerRevisionKind {
		s.marks = append(s.marks, &mark{kind: k.name, name: name, uid: uid, step: len(s.steps)})
	}
}

// actRecreateFromExport creates a deleted child again from its export, as `kubectl create -f` of it.
func (s *seq) actRecreateFromExport(a *app) bool {
	k := pick(s, childKinds...)
	e := a.exports[k.name]
	if e == nil || s.get(k, a.name) != nil {
		return false
	}
	s.record(fmt.Sprintf("re-create %s %s from its export", k.name, a.name), s.heredoc("create", e))
	s.create(k, e.DeepCopy(), "kubectl-create")
	return true
}

// actV1MetadataEdit labels or annotates a live WebApp through v1, as `kubectl label` and `kubectl annotate` do (a
// patch read, converted and written back through the conversion webhook): its spec and generation stay as they
// were, and the patcher's field manager owns only the key it set.
func (s *seq) actV1MetadataEdit(a *app) bool {
	if a.state != alive {
		return false
	}
	field, manager := "labels", "kubectl-label"
	if s.chance(0.5) {
		field, manager = "annotations", "kubectl-annotate"
	}
	key, value := fmt.Sprintf("note-%d", s.rng.IntN(3)), utilrand.String(6)
	s.record(fmt.Sprintf("%s WebApp %s through v1", strings.TrimPrefix(manager, "kubectl-"), a.name),
		fmt.Sprintf("kubectl -n %s %s --overwrite --field-manager=%s webapps.v1.example.com/%s %s=%s", s.ns, strings.TrimPrefix(manager, "kubectl-"), manager, a.name, key, value))
	patch := fmt.Sprintf(`{"metadata":{%q:{%q:%q}}}`, field, key, value)
	got, err := dyn.Resource(webAppKind.gvr).Namespace(s.ns).Patch(context.Background(), a.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: manager})
	if err != nil {
		// Deleted meanwhile, or the conversion webhook faulted: an outcome like any other.
		s.note("refused: %v", err)
		return true
	}
	s.checkV1WriteKeptSpec(a, got, manager, true)
	return true
}

// actV1ApplyExport exports a live WebApp in v1 (`kubectl get -o yaml`, status included) and applies the export
// server-side under another field manager, as a GitOps tool adopting it would: the spec and generation stay, and
// nothing the export carried of the status is owned.
func (s *seq) actV1ApplyExport(a *app) bool {
	if a.state != alive {
		return false
	}
	cur := s.get(webAppKind, a.name)
	if cur == nil {
		return false
	}
	e := export(cur)
	if st, ok := cur.Object["status"]; ok {
		e.Object["status"] = st
	}
	s.record(fmt.Sprintf("apply an export of WebApp %s through v1 under another field manager", a.name), s.heredoc("apply --server-side --field-manager=exporter", e))
	got, err := dyn.Resource(webAppKind.gvr).Namespace(s.ns).Apply(context.Background(), a.name, e, metav1.ApplyOptions{FieldManager: "exporter"})
	if err != nil {
		// The operator wrote the status since the export (a stale status conflicts, as with any export), or the
		// WebApp is gone: an outcome like any other.
		s.note("refused: %v", err)
		return true
	}
	s.checkV1WriteKeptSpec(a, got, "exporter", false)
	// The tool lets go again (an apply of nothing under its manager), so the user's next apply of other values is
	// not a conflict with it: what only it owned goes, and v1's defaults put back the same values.
	release := &unstructured.Unstructured{Object: map[string]any{"apiVersion": webappv1.GroupVersion.String(), "kind": "WebApp", "metadata": map[string]any{"name": a.name}}}
	s.note("%s", s.heredoc("apply --server-side --field-manager=exporter", release))
	if got, err = dyn.Resource(webAppKind.gvr).Namespace(s.ns).Apply(context.Background(), a.name, release, metav1.ApplyOptions{FieldManager: "exporter"}); err != nil {
		s.note("refused: %v", err)
		return true
	}
	s.checkV1WriteKeptSpec(a, got, "exporter", true)
	return true
}

// checkV1WriteKeptSpec checks what a v1 write that did not mean to change the spec left: the spec and generation as
// they were, and the manager owning no status (and, for a metadata edit, no spec either).
func (s *seq) checkV1WriteKeptSpec(a *app, got *unstructured.Unstructured, manager string, metadataOnly bool) {
	typed := &webappv1.WebApp{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, typed); err != nil {
		s.fail("decoding WebApp %s: %v", a.name, err)
	}
	if typed.UID != a.uid {
		return // a new WebApp of the name since: not the one the test knows
	}
	if want, ok := s.specs[typed.UID][typed.Generation]; !ok || !equality.Semantic.DeepEqual(want, typed.Spec) {
		s.fail("a v1 write by %s that meant no spec change left WebApp %s at generation %d with spec\n%+v\nknown spec of that generation (%v)\n%+v", manager, a.name, typed.Generation, typed.Spec, ok, want)
	}
	for _, e := range typed.ManagedFields {
		if e.Manager != manager || e.FieldsV1 == nil {
			continue
		}
		if f := e.FieldsV1.GetRawString(); strings.Contains(f, `"f:status"`) || (metadataOnly && strings.Contains(f, `"f:spec"`)) {
			s.fail("after a v1 write by %s, it owns %s", manager, f)
		}
	}
}

// actCreateForeign creates an object of a child's name that is not the WebApp's: no labels of ours, no owner.
func (s *seq) actCreateForeign(a *app) bool {
	k := pick(s, deploymentKind, serviceKind)
	if s.get(k, a.name) != nil {
		return false
	}
	sel := map[string]any{"app": "foreign-" + a.name}
	o := map[string]any{"apiVersion": k.version, "kind": k.name, "metadata": map[string]any{"name": a.name}}
	if k == deploymentKind {
		o["spec"] = map[string]any{"replicas": int64(1), "selector": map[string]any{"matchLabels": sel}, "template": map[string]any{
			"metadata": map[string]any{"labels": sel},
			"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "foreign:1"}}}}}
	} else {
		o["spec"] = map[string]any{"selector": sel, "ports": []any{map[string]any{"port": int64(80)}}}
	}
	u := &unstructured.Unstructured{Object: o}
	s.record(fmt.Sprintf("create a foreign %s %s", k.name, a.name), s.heredoc("create", u))
	if created := s.create(k, u, "kubectl-create"); created != nil {
		s.foreign[created.GetUID()] = k.name + "/" + a.name
	}
	return true
}

// impostorNodeSelector is on the impostor pods only: no node has it, so they stay unschedulable, with words no pod
// of a WebApp's ever has (it sets no node selector).
const impostorNodeSelector = "impostor.example/never"

// actCreateImpostorPod creates a bare pod with the WebApp's three labels that its Deployment did not make: anyone
// with `create pods` can; its trouble (unschedulable, a node selector nothing matches) must never show in the
// WebApp's status.
func (s *seq) actCreateImpostorPod(a *app) bool {
	name := fmt.Sprintf("%s-impostor-%d", a.name, len(s.steps))
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "labels": map[string]any{
			webappv2.LabelName: "webapp", webappv2.LabelInstance: a.name, webappv2.LabelManagedBy: webappv2.ManagedBy}},
		"spec": map[string]any{"nodeSelector": map[string]any{impostorNodeSelector: "true"},
			"containers": []any{map[string]any{"name": "app", "image": "evil.example/impostor:1"}}}}}
	s.record(fmt.Sprintf("create a pod with WebApp %s's labels that its Deployment did not make", a.name), s.heredoc("create", u))
	if _, err := dyn.Resource(podGVR).Namespace(s.ns).Create(context.Background(), u, metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
		s.note("refused: %v", err)
	}
	return true
}

var podGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// actToggleGatewayAPI uninstalls the Gateway API's HTTPRoute CRD when it is served and installs it when it is not,
// while the operator runs: an optional API that comes and goes is a state, not an error; nothing may hang, storm or
// be written at rest.
func (s *seq) actToggleGatewayAPI(*app) bool {
	crd := gatewayAPICRD(s.reporting())
	if httpRouteServed() {
		s.record("uninstall the Gateway API (the HTTPRoute CRD)", "kubectl delete -f "+crd)
		if err := envtest.UninstallCRDs(lc.Config, envtest.CRDInstallOptions{Paths: []string{crd}}); err != nil {
			s.fail("uninstalling the HTTPRoute CRD: %v", err)
		}
		return true
	}
	s.record("install the Gateway API (the HTTPRoute CRD)", "kubectl apply -f "+crd)
	if _, err := envtest.InstallCRDs(lc.Config, envtest.CRDInstallOptions{Paths: []string{crd}, ErrorIfPathMissing: true}); err != nil {
		s.fail("installing the HTTPRoute CRD: %v", err)
	}
	return true
}

// gatewayAPICRD is the Gateway API's standard HTTPRoute CRD, from the module go.mod pins.
func gatewayAPICRD(t testing.TB) string { return gatewayAPICRDOf(t, "httproutes") }

// gatewayAPICRDOf is the Gateway API's standard CRD of resource, from the module go.mod pins.
func gatewayAPICRDOf(t testing.TB, resource string) string {
	module, err := cluster.ModuleDir(cluster.RepoRoot(), "sigs.k8s.io/gateway-api")
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(module, "config", "crd", "standard", "gateway.networking.k8s.io_"+resource+".yaml")
}

// httpRouteServed: discovery lists HTTPRoute (a CRD being deleted is listed until it is gone).
func httpRouteServed() bool {
	list, err := discovery.NewDiscoveryClientForConfigOrDie(lc.Config).ServerResourcesForGroupVersion("gateway.networking.k8s.io/v1")
	if err != nil {
		return false
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "httproutes" })
}

// create creates u of kind k under field manager m and remembers it as the test's; nil if the server refused.
func (s *seq) create(k kind, u *unstructured.Unstructured, m string) *unstructured.Unstructured {
	created, err := dyn.Resource(k.gvr).Namespace(s.ns).Create(context.Background(), u, metav1.CreateOptions{FieldManager: m})
	if err != nil {
		// Someone (the operator) was first, or the server refuses it: an outcome like any other.
		s.note("refused: %v", err)
		return nil
	}
	s.ours[created.GetUID()] = true
	s.clearMarks(k.name, u.GetName(), rv(created))
	return created
}

// actOpsApply applies fields of the Deployment under another field manager, "ops": an extra label, annotation or
// env var, a value that conflicts with ours (forced), or the whole exported Deployment (co-owning all of it).
func (s *seq) actOpsApply(a *app) bool {
	cur := s.get(deploymentKind, a.name)
	if cur == nil || !controlledByAWebApp(cur) {
		return false
	}
	head := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": a.name}}
	container := func(fields map[string]any) map[string]any {
		fields["name"] = "app"
		return map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{fields}}}}
	}
	var what string
	force := false
	switch s.rng.IntN(6) {
	case 0:
		what = "an extra label"
		head["metadata"] = map[string]any{"name": a.name, "labels": map[string]any{"ops.example.com/team": pick(s, "red", "blue")}}
	case 1:
		what = "an extra annotation"
		head["metadata"] = map[string]any{"name": a.name, "annotations": map[string]any{"ops.example.com/note": pick(s, "x", "y")}}
	case 2:
		what = "an extra env var"
		head["spec"] = container(map[string]any{"env": []any{map[string]any{"name": "OPS_LEVEL", "value": strconv.Itoa(s.rng.IntN(3))}}})
	case 3:
		what, force = "a conflicting replicas", true
		head["spec"] = map[string]any{"replicas": int64(1 + s.rng.IntN(5))}
	case 4:
		what, force = "a conflicting image", true
		head["spec"] = container(map[string]any{"image": pick(s, "ops:1", "ops:2")})
	default:
		what = "the whole exported Deployment"
		head = export(cur).Object
	}
	u := &unstructured.Unstructured{Object: head}
	verb := "apply --server-side --field-manager=ops"
	if force {
		verb += " --force-conflicts"
	}
	s.record(fmt.Sprintf("ops applies %s to Deployment %s", what, a.name), s.heredoc(verb, u))
	got, err := dyn.Resource(deploymentKind.gvr).Namespace(s.ns).Apply(context.Background(), a.name, u, metav1.ApplyOptions{FieldManager: "ops", Force: force})
	if err != nil {
		s.note("refused: %v", err)
		return true
	}
	if got.GetUID() != cur.GetUID() {
		// The Deployment had gone meanwhile and this apply created it: it is ops's.
		s.ours[got.GetUID()] = true
		s.clearMarks(deploymentKind.name, a.name, rv(got))
	}
	return true
}

// actInjectFault makes the API answer the operator's PATCHes of Deployments or Services with an error, for the
// next one to three steps.
func (s *seq) actInjectFault(*app) bool {
	if s.faults.Load() != nil {
		return false
	}
	f := &fault{method: "PATCH", resource: pick(s, "deployments", "services")}
	if s.chance(0.5) {
		f.code, f.reason, f.message = 403, metav1.StatusReasonForbidden, fmt.Sprintf("%s is forbidden: exceeded quota: compute-resources", f.resource)
	} else {
		f.code, f.reason, f.message = 503, metav1.StatusReasonServiceUnavailable, "the server is currently unable to handle the request"
	}
	s.faultN = 1 + s.rng.IntN(3)
	s.record("inject an API error", fmt.Sprintf("# inject fault for %d steps: the operator's %s", s.faultN, f))
	s.faults.Store(f)
	return true
}

func (s *seq) removeFault() {
	s.record("remove the API error", "# remove the fault")
	s.faults.Store(nil)
	s.faultN = 0
}

// actRestart stops the operator and starts a fresh one: everything it remembered is lost.
func (s *seq) actRestart(*app) bool {
	s.restart()
	return true
}

func (s *seq) restart() {
	s.record("restart the operator", "# restart the operator")
	s.op.stop()
	s.op = startOperator(s.t, s.ns, requeue, s.writes, &s.faults)
}

// actLetWork lets the operator work for one or two resyncs: without it the actors would always be faster.
func (s *seq) actLetWork(*app) bool {
	n := 1 + s.rng.IntN(2)
	s.record("let the operator work", fmt.Sprintf("# wait for %d resyncs of the operator (about %v)", n, time.Duration(n+1)*requeue))
	waitResyncs(s.reporting(), n, requeue)
	return true
}

// --- helpers ---

// randomSpec draws a spec: an image, 1 to 4 replicas, some env vars and pod labels; one in ten has a pod label
// value the CRD accepts and the Deployment API refuses.
func (s *seq) randomSpec(policy webappv1.DeletionPolicy) webappv1.WebAppSpec {
	spec := webappv1.WebAppSpec{Image: pick(s, "nginx:1.25", "nginx:1.27", "web:1", "web:2"), Replicas: int32(1 + s.rng.IntN(4)), DeletionPolicy: policy}
	for _, n := range []string{"A", "B", "C"} {
		if s.chance(0.4) {
			spec.Env = append(spec.Env, corev1.EnvVar{Name: n, Value: strconv.Itoa(s.rng.IntN(3))})
		}
	}
	labels := map[string]string{}
	if s.chance(0.4) {
		labels["team"] = pick(s, "a", "b")
	}
	if s.chance(0.3) {
		labels["version"] = pick(s, "v1", "v2")
	}
	if s.chance(0.1) {
		labels["tier"] = "has space"
	}
	if len(labels) > 0 {
		spec.PodLabels = labels
	}
	// One in eight asks for more CPU than the node has: its pods stay unschedulable (pod trouble the status reports,
	// which a restart must not make flap); one in three of those gives up on progress after a few seconds
	// (ProgressDeadlineExceeded, with the trouble in its message).
	if s.chance(0.125) {
		spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(unschedulableCPU)}
		if s.chance(0.33) {
			spec.ProgressDeadlineSeconds = int32(3 + s.rng.IntN(5))
		}
	}
	return spec
}

// unschedulableCPU is more CPU than the kwok node has (64).
const unschedulableCPU = "1000"

// unschedulable reports whether spec's pods can never be scheduled (see randomSpec).
func unschedulable(spec webappv1.WebAppSpec) bool {
	cpu, ok := spec.Resources.Requests[corev1.ResourceCPU]
	return ok && cpu.Cmp(resource.MustParse(unschedulableCPU)) >= 0
}

// refused reports whether the Deployment API refuses spec (a pod label value with a space).
func refused(spec webappv1.WebAppSpec) bool {
	for _, v := range spec.PodLabels {
		if strings.Contains(v, " ") {
			return true
		}
	}
	return false
}

// applySpec applies the WebApp with spec as its user does (Server-Side Apply, field manager "user") and records
// the spec of the generation it got; nil if the server refused.
func (s *seq) applySpec(a *app, spec webappv1.WebAppSpec) *unstructured.Unstructured {
	sp := map[string]any{"image": spec.Image, "replicas": int64(spec.Replicas), "deletionPolicy": string(spec.DeletionPolicy)}
	if len(spec.Env) > 0 {
		var env []any
		for _, e := range spec.Env {
			env = append(env, map[string]any{"name": e.Name, "value": e.Value})
		}
		sp["env"] = env
	}
	if len(spec.PodLabels) > 0 {
		l := map[string]any{}
		for k, v := range spec.PodLabels {
			l[k] = v
		}
		sp["podLabels"] = l
	}
	if cpu, ok := spec.Resources.Requests[corev1.ResourceCPU]; ok {
		sp["resources"] = map[string]any{"requests": map[string]any{"cpu": cpu.String()}}
	}
	if spec.ProgressDeadlineSeconds != 0 {
		sp["progressDeadlineSeconds"] = int64(spec.ProgressDeadlineSeconds)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": webappv1.GroupVersion.String(), "kind": "WebApp",
		"metadata": map[string]any{"name": a.name}, "spec": sp}}
	last := &s.steps[len(s.steps)-1]
	last.cmds = append(last.cmds, s.heredoc("apply --server-side --field-manager=user", u))
	got, err := dyn.Resource(webAppKind.gvr).Namespace(s.ns).Apply(context.Background(), a.name, u, metav1.ApplyOptions{FieldManager: "user"})
	if err != nil {
		s.fail("applying WebApp %s: %v", a.name, err)
	}
	typed := s.recordGeneration(a, got)
	s.note("generation %d%s", typed.Generation, map[bool]string{true: " (refused by the Deployment API: a pod label value with a space)"}[refused(typed.Spec)])
	if unschedulable(typed.Spec) {
		s.t.Logf("  WebApp %s generation %d asks for more CPU than the node has: its pods stay unschedulable (progress deadline %ds)", a.name, typed.Generation, typed.Spec.ProgressDeadlineSeconds)
	}
	return got
}

// recordWrite records the generation another client's accepted write gave WebApp a (recordGeneration), read back
// through v1; the WebApp must still be there, and be of uid when it is given.
func (s *seq) recordWrite(a *app, uid types.UID) *webappv1.WebApp {
	v1 := s.get(webAppKind, a.name)
	if v1 == nil || (uid != "" && v1.GetUID() != uid) {
		s.fail("WebApp %s gone after an accepted write", a.name)
	}
	typed := s.recordGeneration(a, v1)
	s.note("generation %d", typed.Generation)
	return typed
}

// recordGeneration records the spec of the generation got (a WebApp as a v1 client reads it) has, and its
// autoscaling bounds, which only v2 shows (read back at once: only the test changes a spec).
func (s *seq) recordGeneration(a *app, got *unstructured.Unstructured) *webappv1.WebApp {
	typed := &webappv1.WebApp{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, typed); err != nil {
		s.fail("decoding WebApp %s: %v", a.name, err)
	}
	if s.specs[typed.UID] == nil {
		s.specs[typed.UID] = map[int64]webappv1.WebAppSpec{}
		s.bounds[typed.UID] = map[int64]*bounds{}
	}
	s.specs[typed.UID][typed.Generation] = typed.Spec
	a.spec = typed.Spec
	v2 := &webappv2.WebApp{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: s.ns, Name: a.name}, v2); err != nil {
		s.fail("reading WebApp %s through v2: %v", a.name, err)
	}
	var b *bounds
	if as := v2.Spec.Autoscaling; as != nil && v2.UID == typed.UID && v2.Generation == typed.Generation {
		b = &bounds{min: ptr.Deref(as.MinReplicas, 1), max: as.MaxReplicas}
	}
	s.bounds[typed.UID][typed.Generation] = b
	return typed
}

// bounds are a generation's autoscaling bounds.
type bounds struct{ min, max int32 }

// autoscaled is the autoscaling of WebApp uid's generation g (nil: none).
func (s *seq) autoscaled(uid types.UID, g int64) *bounds { return s.bounds[uid][g] }

// actAutoscale has another client (field manager "autoscaler") switch autoscaling on with new bounds, or off,
// through v2 (v1 keeps it in its conversion data); or try a behavior the HPA API would refuse, which the CRD must
// refuse. With HPAs refused (actRefuseHPAs) the count stays with the WebApp.
func (s *seq) actAutoscale(a *app) bool {
	if a.state != alive {
		return false
	}
	sp := map[string]any{}
	what := "switch autoscaling off"
	refusedBehavior := s.chance(0.15)
	switch {
	case refusedBehavior:
		what = "try an autoscaling behavior the HPA API refuses"
		sp["autoscaling"] = map[string]any{"maxReplicas": int64(3), "behavior": map[string]any{"scaleDown": pick(s,
			map[string]any{"stabilizationWindowSeconds": int64(7200)},
			map[string]any{"policies": []any{map[string]any{"type": "Pods", "value": int64(1), "periodSeconds": int64(1801)}}},
			map[string]any{"policies": []any{map[string]any{"type": "Percent", "value": int64(0), "periodSeconds": int64(60)}}})}}
	case s.chance(0.7):
		lo := int64(1 + s.rng.IntN(2))
		sp["autoscaling"] = map[string]any{"minReplicas": lo, "maxReplicas": lo + int64(s.rng.IntN(3))}
		what = fmt.Sprintf("autoscale between %d and %d replicas", lo, sp["autoscaling"].(map[string]any)["maxReplicas"])
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": webappv2.GroupVersion.String(), "kind": "WebApp",
		"metadata": map[string]any{"name": a.name}, "spec": sp}}
	var got *unstructured.Unstructured
	var err error
	if sp["autoscaling"] == nil {
		// Switched off by a JSON merge patch: a v2 server-side apply that leaves spec.autoscaling out does not
		// remove it while the v1 user co-owns the WebApp (docs/api.md, "Known gap").
		s.record(fmt.Sprintf("%s for WebApp %s", what, a.name),
			fmt.Sprintf(`kubectl -n %s patch webapps.v2.example.com/%s --type=merge --field-manager=autoscaler -p '{"spec":{"autoscaling":null}}'`, s.ns, a.name))
		got, err = dyn.Resource(webAppV2GVR).Namespace(s.ns).Patch(context.Background(), a.name, types.MergePatchType, []byte(`{"spec":{"autoscaling":null}}`), metav1.PatchOptions{FieldManager: "autoscaler"})
	} else {
		s.record(fmt.Sprintf("%s for WebApp %s", what, a.name), s.heredoc("apply --server-side --field-manager=autoscaler", u))
		got, err = dyn.Resource(webAppV2GVR).Namespace(s.ns).Apply(context.Background(), a.name, u, metav1.ApplyOptions{FieldManager: "autoscaler"})
	}
	switch {
	case refusedBehavior && err == nil:
		s.fail("the WebApp API accepted an autoscaling behavior the HorizontalPodAutoscaler API refuses:\n%s", toYAML(u.Object))
	case refusedBehavior:
		s.note("refused: %v", err)
		return true
	case err != nil:
		s.fail("applying autoscaling to WebApp %s: %v", a.name, err)
	}
	typed := s.recordWrite(a, got.GetUID())
	if sp["autoscaling"] == nil && s.autoscaled(typed.UID, typed.Generation) != nil {
		s.fail("autoscaling was switched off for WebApp %s, and the WebApp still autoscales at generation %d", a.name, typed.Generation)
	}
	return true
}

var webAppV2GVR = schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "webapps"}

// noHPAs is the ResourceQuota that refuses every HorizontalPodAutoscaler of the namespace.
const noHPAs = "no-hpas"

// actRefuseHPAs creates or deletes a ResourceQuota that allows no HorizontalPodAutoscaler: an autoscaled WebApp's
// HPA is then refused, and its replica count must stay with the WebApp, within its bounds.
func (s *seq) actRefuseHPAs(*app) bool {
	q := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ResourceQuota",
		"metadata": map[string]any{"name": noHPAs}, "spec": map[string]any{"hard": map[string]any{"count/horizontalpodautoscalers.autoscaling": "0"}}}}
	if s.hpasRefused {
		s.record("allow HorizontalPodAutoscalers again", fmt.Sprintf("kubectl -n %s delete resourcequota %s", s.ns, noHPAs))
		if err := dyn.Resource(quotaGVR).Namespace(s.ns).Delete(context.Background(), noHPAs, metav1.DeleteOptions{}); err != nil {
			s.fail("deleting the quota: %v", err)
		}
		s.hpasRefused = false
		return true
	}
	s.record("refuse every HorizontalPodAutoscaler by a quota", s.heredoc("create", q))
	if _, err := dyn.Resource(quotaGVR).Namespace(s.ns).Create(context.Background(), q, metav1.CreateOptions{}); err != nil {
		s.fail("creating the quota: %v", err)
	}
	s.hpasRefused = true
	return true
}

var quotaGVR = schema.GroupVersionResource{Version: "v1", Resource: "resourcequotas"}

// clearMarks ends the marks of kind (every child kind when "") named name: the test itself created that name
// again at resourceVersion at.
func (s *seq) clearMarks(kind, name string, at int64) {
	for _, m := range s.marks {
		if m.name == name && (kind == "" || m.kind == kind) && m.clearedAt == 0 {
			m.clearedAt = at
		}
	}
}

// get reads the object of kind k named name; nil when there is none.
func (s *seq) get(k kind, name string) *unstructured.Unstructured {
	u, err := dyn.Resource(k.gvr).Namespace(s.ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		s.fail("reading %s %s: %v", k.name, name, err)
	}
	return u
}

// export is u as `kubectl get -o yaml` shows it, less what the server sets: ready for `kubectl create -f`.
func export(u *unstructured.Unstructured) *unstructured.Unstructured {
	e := u.DeepCopy()
	for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"} {
		unstructured.RemoveNestedField(e.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(e.Object, "metadata", "namespace")
	unstructured.RemoveNestedField(e.Object, "status")
	return e
}

// heredoc is a kubectl command that sends u on stdin.
func (s *seq) heredoc(verb string, u *unstructured.Unstructured) string {
	data, err := yaml.Marshal(u.Object)
	if err != nil {
		return fmt.Sprintf("# (cannot print: %v)", err)
	}
	return fmt.Sprintf("kubectl -n %s %s -f - <<'YAML'\n%sYAML", s.ns, verb, data)
}

func rv(u *unstructured.Unstructured) int64 {
	n, _ := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
	return n
}

// controlledBy reports whether u's controller reference names the WebApp of uid.
func controlledBy(u metav1.Object, uid types.UID) bool {
	ref := metav1.GetControllerOfNoCopy(u)
	return ref != nil && ref.UID == uid
}

// controlledByAWebApp reports whether u's controller is a WebApp (of any UID).
func controlledByAWebApp(u metav1.Object) bool {
	ref := metav1.GetControllerOfNoCopy(u)
	return ref != nil && ref.Kind == "WebApp"
}
