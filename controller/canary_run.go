package controller

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/canary"
	"github.com/example/webapp-operator/controller/checks"
	"github.com/example/webapp-operator/controller/desired"
	"github.com/example/webapp-operator/controller/pods"
	"github.com/example/webapp-operator/controller/ssa"
	"github.com/example/webapp-operator/controller/status"
)

// A reconcile's part in a canary rollout (spec.rollout.canary): it observes both versions, asks the step machine
// (controller/canary) what follows, and hands the builders (controller/desired) what they need. The rollout's state is the
// WebApp's status.canary, so a restart or a new leader resumes it where it was.

// defaultCheckInterval is how often a canary's checks are evaluated when the spec does not say.
const defaultCheckInterval = 10 * time.Second

// defaultNoDataWait is how long a check with onNoData: Wait may give no value when noDataWaitSeconds is not set.
const defaultNoDataWait = 5 * time.Minute

// canaryRun is a reconcile's canary: what was decided, and what the builders need of it.
type canaryRun struct {
	plan     canary.Plan
	decision canary.Decision
	// revision is the spec's pod template's.
	revision string
	// hold: the stable version keeps serving beside a canary or after a rollback; held is then its Deployment's
	// pod template as our manager owns it (nil: unknown, the Deployment missing or unreadable).
	hold bool
	held *corev1ac.PodTemplateSpecApplyConfiguration
	// kept is, while a canary is promoted, the stable version's pod template its record still holds (nil: none):
	// the record keeps it until the promotion completes, so an abort can roll the stable Deployment back to it.
	kept *corev1ac.PodTemplateSpecApplyConfiguration
	// warm is, while the version the last promotion replaced is kept warm (Decision.Warm), its pod template as the
	// record holds it: the record keeps it through the rollback window, and the canary's Deployment runs it.
	warm *corev1ac.PodTemplateSpecApplyConfiguration
	// retiring and retiringSvc are, while a canary the spec left retires (State.Retiring), its Deployment and
	// Service as our manager owns them, applied as they are (nil: none of that version is there).
	retiring    *appsv1ac.DeploymentApplyConfiguration
	retiringSvc *corev1ac.ServiceApplyConfiguration
	// retireOnly: the strategy is out of the spec, and a canary's pods retire (retiringWithoutStrategy); for all
	// else the WebApp has no strategy.
	retireOnly bool
	// stableReplicas is the stable Deployment's count, which the canary's follows.
	stableReplicas int32
	// err: the canary could not be decided (its inputs unknown); its objects are left as they are.
	err error

	// What observeCanary read for decide.
	state canary.State       // the state the status keeps
	seen  canary.Observation // both versions as the step machine takes them
	// record is the stable version's record, stable the stable Deployment (as the server has it when the cache has
	// not seen our last write of it): where the stable version's pod template is found (heldStable).
	record *appsv1.ControllerRevision
	stable *appsv1.Deployment
	// canaryObjs are the canary's objects where a retiring canary's are found (read only when one may retire).
	canaryObjs canaryObjects
}

// planOf is the spec's strategy with its defaults; switched: a blue/green switched by the WebApp's Service
// (desired.CanarySwitched), which no gateway must warm up for.
func planOf(spec *webappv2.CanarySpec, switched bool) canary.Plan {
	interval := defaultCheckInterval
	if spec.CheckIntervalSeconds > 0 {
		interval = time.Duration(spec.CheckIntervalSeconds) * time.Second
	}
	p := canary.Plan{RollbackWindow: time.Duration(spec.RollbackWindowSeconds) * time.Second, BlueGreen: spec.BlueGreen != nil,
		KeepWarm: spec.KeepPreviousWarm && spec.RollbackWindowSeconds > 0, Switched: switched, Retire: time.Duration(spec.RetireSeconds) * time.Second}
	for i, s := range spec.EffectiveSteps() {
		step := canary.Step{Weight: s.Weight, Pause: time.Duration(s.PauseSeconds) * time.Second, Matches: s.Matches, Mirror: s.MirrorPercent}
		if p.BlueGreen {
			// A blue/green's switch runs the new version at full size, its preview too unless previewPercent says.
			step.Size = 100
			if i == 0 {
				step.Size = spec.BlueGreen.PreviewSize()
			}
		}
		if p.BlueGreen && i == 1 {
			// The keep is counted from the switch, which reaches the route a warm-up after the step starts (the
			// Service's at once): with checks, their passing round is taken on the production traffic.
			step.Pause += p.Warmup()
		}
		if g := s.Gate; g != nil {
			step.Gate, step.GateTimeout, step.OnTimeout = true, time.Duration(g.TimeoutSeconds)*time.Second, g.OnTimeout
		}
		p.Steps = append(p.Steps, step)
	}
	for _, c := range spec.Checks {
		// The CRD's pattern admits decimal numbers only.
		limit, _ := strconv.ParseFloat(c.Max, 64)
		wait := defaultNoDataWait
		if c.NoDataWaitSeconds > 0 {
			wait = time.Duration(c.NoDataWaitSeconds) * time.Second
		}
		check := canary.Check{Name: c.Name, Max: limit, Interval: interval, FailuresAllowed: c.FailuresAllowed, NoData: c.OnNoData, NoDataWait: wait}
		switch {
		case !p.BlueGreen:
			// (The CRD takes during only with blueGreen: with steps, every check gates every step.)
		case c.During == webappv2.DuringPreview:
			check.Steps = []int{0}
		case c.During == webappv2.DuringKeep:
			check.Steps = []int{1}
		}
		switch {
		case c.Webhook != nil:
			check.Address = c.Webhook.URL
		case c.Prometheus != nil:
			check.Address, check.Query = c.Prometheus.Address, c.Prometheus.Query
		}
		p.Checks = append(p.Checks, check)
	}
	return p
}

// stateOf is the state a status keeps, fitted to plan (failures in the plan's order, by name) and to the spec's
// revision.
func stateOf(st *webappv2.CanaryStatus, plan canary.Plan, revision string) canary.State {
	if st == nil {
		return canary.State{}
	}
	s := storedState(st)
	if st.Phase == string(canary.PhasePromoting) && st.CanaryRevision != "" {
		// Promoted stays promoted: steps added to the plan meanwhile do not send the rollout back to one (and a check
		// then cannot roll back a version the stable Deployment already runs).
		s.Step = len(plan.Steps)
	}
	if st.Phase == string(canary.PhaseCanary) && st.CanaryRevision == revision && st.Strategy != "" && st.Strategy != plan.Kind() {
		// The strategy turned into the other kind while the canary ran its steps (steps into a blue/green, or back): it
		// starts again at the new one's first step, with none of the traffic until its pods are ready there. So a
		// blue/green's switch always follows its own preview and gate, never a step of the same index; and the stable
		// count a switch held is let go. (A status that predates the field resumes as it is; a canary the spec left
		// at the same time is left from where it was, its pods retiring if the traffic reached them.)
		s.Step, s.Since, s.GateSince, s.Held = 0, time.Time{}, time.Time{}, 0
	}
	if st.Phase == string(canary.PhaseCanary) && st.CanaryRevision != "" && s.Step >= len(plan.Steps) {
		// Steps taken out of the plan while the canary ran (or a blue/green made of steps): it runs the plan's last
		// step from its start, its pods counted for it, rather than be promoted untried, its traffic sent to pods
		// counted for another step.
		s.Step, s.Since, s.GateSince = len(plan.Steps)-1, time.Time{}, time.Time{}
	}
	for _, f := range st.Failures {
		for i, c := range plan.Checks {
			if c.Name == f.Name && f.Count > 0 {
				s.Failures = countFailures(s.Failures, len(plan.Checks), i, f.Count)
			}
		}
	}
	return s
}

// storedState is the state a status keeps as it is, whatever the plan (the failures, which only a plan orders,
// left out).
func storedState(st *webappv2.CanaryStatus) canary.State {
	s := canary.State{Stable: st.StableRevision, Canary: st.CanaryRevision, Failed: st.FailedRevision, Step: max(int(st.Step), 0),
		Reason: st.Reason, Message: st.Message, ActedOn: st.ActedOn, Previous: st.PreviousRevision, Retiring: st.RetiringRevision, Held: st.HeldReplicas}
	if st.StepStartedAt != nil {
		s.Since = st.StepStartedAt.Time
	}
	if st.GateSince != nil {
		s.GateSince = st.GateSince.Time
	}
	if st.RetiringSince != nil {
		s.RetiringSince = st.RetiringSince.Time
	}
	if st.PreviousUntil != nil {
		s.PreviousUntil = st.PreviousUntil.Time
	}
	for _, e := range st.Checks {
		ev := canary.Evaluation{Name: e.Name, Value: e.Value, Max: e.Max, Passed: e.Passed, Error: e.Error,
			Address: e.Address, Query: e.Query, At: e.EvaluatedAt.Time}
		if e.NoDataSince != nil {
			ev.NoDataSince = e.NoDataSince.Time
		}
		s.Evaluations = append(s.Evaluations, ev)
	}
	return s
}

func countFailures(failures []int32, n, i int, count int32) []int32 {
	out := make([]int32, n)
	copy(out, failures)
	out[i] = count
	return out
}

// observeCanary reads what app's canary is decided from: its state, both versions, the canary's pods and their
// probes, the checks' last round (starting the next one when it is due, in the background), and where the stable
// version's pod template is kept; nil without a strategy.
func (r *WebAppReconciler) observeCanary(ctx context.Context, app *webappv2.WebApp, o observed) *canaryRun {
	spec := app.Spec.Rollout.Canary
	if spec == nil {
		return r.retiringWithoutStrategy(ctx, app, o)
	}
	run := &canaryRun{plan: planOf(spec, desired.CanarySwitched(app))}
	run.plan.Shared = desired.CanaryShared(app)
	if o.configErr != nil || o.hpaErr != nil || o.trafficErr != nil {
		// Which version the spec is, the count the canary follows, or whether the traffic has left its pods, is not
		// known.
		run.err = errors.Join(o.configErr, o.hpaErr, o.trafficErr)
		return run
	}
	want, err := desired.Deployment(app, o.Inputs)
	if err == nil {
		run.revision, err = desired.Revision(want.Spec.Template)
	}
	if err != nil {
		run.err = err
		return run
	}
	state, err := r.canaryState(ctx, app, run.plan, run.revision)
	if err != nil {
		run.err = err
		return run
	}
	stable := o.stable
	canaryDep := r.cachedDeploymentOf(ctx, app, desired.CanaryName(app))
	run.stableReplicas = desired.WebAppReplicas(app)
	if desired.ReplicasByHPA(app, o.HPAExists) && stable != nil && stable.Spec.Replicas != nil {
		// The HPA's count is the stable version's; the canary's comes on top of it, never out of it.
		run.stableReplicas = *stable.Spec.Replicas
	}
	now := o.now
	obs := canary.Observation{Revision: run.revision, Deployed: deployedRevision(stable, want.Spec.Template, run.revision),
		Action: app.Annotations[webappv2.AnnotationAction], TrafficOnCanary: o.traffic.onCanary(), TrafficLeft: o.traffic.changed}
	if app.Spec.Autoscaling != nil {
		// What a blue/green's switch holds as the HPA's floor (without autoscaling, nothing is held).
		obs.StableReplicas = run.stableReplicas
	}
	trying := state.Canary == run.revision && state.Canary != ""
	if trying && state.Step < len(run.plan.Steps) {
		n := desired.CanaryReplicas(run.stableReplicas, desired.CanaryBound(app), run.plan.Steps[state.Step].Pods(), desired.CanaryShared(app))
		// Behind a route, its Service must be ours too (one of that name that is not: no traffic goes there).
		obs.CanaryReady = runs(canaryDep, state.Canary) && status.RolledOut(canaryDep, n) && (desired.CanaryShared(app) || r.hasCanaryService(ctx, app))
		if state.Step+1 < len(run.plan.Steps) {
			// The next step's share may need the same count (20% and 25% of 4 pods are one pod each).
			obs.NextStepReady = obs.CanaryReady && n == desired.CanaryReplicas(run.stableReplicas, desired.CanaryBound(app), run.plan.Steps[state.Step+1].Pods(), desired.CanaryShared(app))
		}
	}
	if trying && state.Step < len(run.plan.Steps) && runs(canaryDep, state.Canary) {
		// The canary's pods' trouble, as the stable pods' is found (their probes' words too).
		podList, _ := r.podsOf(ctx, app, canaryDep)
		// Only this canaryDep's: the pods of one rolled back just before may still be going.
		podList = slices.DeleteFunc(slices.Clone(podList), func(p *pods.Pod) bool { return p.Labels[webappv2.LabelCanaryRevision] != state.Canary })
		probes, _ := r.probeFailures(ctx, app.Namespace, podList)
		obs.TroubleReason, obs.TroubleMessage = pods.Trouble(settledPods(podList, now), settledProbes(podList, probes, now))
	}
	if trying {
		// What the plan's route needs beyond the core, asked of the Gateway's class before the route asks for it
		// (while promoting too: the last step's traffic stays until the stable Deployment has rolled).
		if obs.GatewayLacks, err = r.gatewayLacks(ctx, app, run.plan.GatewayFeatures()); err != nil {
			run.err = err
			return run
		}
	}
	if trying && state.Step >= len(run.plan.Steps) {
		obs.StableRolledOut = runs(stable, state.Canary) && status.RolledOut(stable, run.stableReplicas)
	}
	if trying && checksWanted(run.plan, state, obs, now) {
		var pauseEnd time.Time
		if !state.Since.IsZero() {
			pauseEnd = state.Since.Add(run.plan.Steps[state.Step].Pause)
		}
		key := client.ObjectKeyFromObject(app)
		// The results of a round that ended (its end brought this reconcile), then a new round if one is due.
		if round, ok := r.checks.take(key, state.Canary, state.Step); ok {
			obs.Checks, obs.ChecksAt = round.results, round.at
		}
		if r.checks.due(key, state.Canary, state.Step, run.plan.Checks[0].Interval, pauseEnd, now) {
			rt, checkSpecs := r.checkTransport(), spec.Checks[:len(run.plan.Checks)]
			// What a webhook is told of the canary it measures.
			req := checks.NewCheckRequest()
			req.Namespace, req.WebApp, req.CanaryRevision, req.StableRevision, req.Step = app.Namespace, app.Name, state.Canary, state.Stable, state.Step
			req.Weight, req.Time = run.plan.Steps[min(state.Step, len(run.plan.Steps)-1)].Weight, now.UTC().Truncate(time.Second)
			// The webhooks' headers, their Secrets read now (a Secret changed is used from the next round); a
			// Secret that could not be read for another reason than its absence starts no round: tried again.
			headers, err := r.webhookHeaders(ctx, app.Namespace, checkSpecs)
			if err != nil {
				run.err = err
				return run
			}
			// Only the checks of this step are queried (a blue/green's check of its other part is not).
			gates := make([]bool, len(checkSpecs))
			for i := range gates {
				gates[i] = run.plan.Checks[i].At(state.Step)
			}
			r.checks.start(ctx, key, state.Canary, state.Step, now, func(ctx context.Context) []canary.CheckResult {
				return queryChecks(ctx, rt, checkSpecs, gates, headers, req, now)
			})
		}
	}
	// The revisions the decision may hold as stable: the state's (the one deployed, before any), or a promoted
	// canary's that a newer version interrupts.
	keep := []string{state.Stable}
	if state.Stable == "" {
		keep[0] = obs.Deployed
	}
	if state.Canary != "" && state.Step >= len(run.plan.Steps) {
		keep = append(keep, state.Canary)
	}
	run.record, run.stable = r.stableTemplateSources(ctx, app, stable, keep)
	if trying && state.Step >= len(run.plan.Steps) {
		// Promoting: an abort can go back only to a version the record still holds.
		obs.StableKept = heldTemplate(run.record, state.Stable) != nil
	}
	if run.record != nil {
		obs.Recorded = run.record.Annotations[webappv2.AnnotationRevision]
	}
	if run.plan.KeepWarm && !run.plan.Shared && state.Canary == "" && state.Previous != "" && run.revision == state.Previous {
		// The spec set back to the version kept warm: its pods take the traffic at once if every one is ready.
		n := desired.CanaryReplicas(run.stableReplicas, desired.CanaryBound(app), 100, false)
		obs.WarmReady = runs(canaryDep, state.Previous) && status.RolledOut(canaryDep, n) && r.hasCanaryService(ctx, app)
	}
	mayRetire := state.Retiring != "" || state.Canary != "" && state.Canary != run.revision ||
		state.Failed != "" && state.Failed != run.revision && !state.Since.IsZero()
	if mayRetire {
		if run.canaryObjs, err = r.retiringCanaryObjects(ctx, app); err != nil {
			run.err = err
			return run
		}
	}
	run.state, run.seen = state, obs
	return run
}

// canaryObjects are app's canary Deployment and Service (nil: none of app's), where a retiring canary's are found.
type canaryObjects struct {
	dep *appsv1.Deployment
	svc *corev1.Service
}

// retiringCanaryObjects reads app's canary Deployment and Service with our manager's fields whole: through the
// client (the cache keeps our entry without its owner's UID, which the client puts back), or from the API server
// when the cache has not seen our last write of one. A retiring canary's objects are applied as our manager owns
// them, never as a write the cache missed; a read that fails (other than NotFound) leaves them as they are.
func (r *WebAppReconciler) retiringCanaryObjects(ctx context.Context, app *webappv2.WebApp) (canaryObjects, error) {
	var out canaryObjects
	for _, id := range []string{"Deployment/canary", "Service/canary"} {
		c := childOf(id)
		if c == nil {
			continue
		}
		obj, err := r.readChild(ctx, *c, app)
		if err != nil {
			return canaryObjects{}, err
		}
		switch o := obj.(type) {
		case *appsv1.Deployment:
			out.dep = o
		case *corev1.Service:
			out.svc = o
		}
	}
	return out, nil
}

// retiringWithoutStrategy is the run of a WebApp whose strategy was taken out of the spec while the route sent its
// canary traffic (or while a rolled-back one's pods retired): its pods retire first, as those of a version the spec
// left do (canary.Dropped), and status.canary says so until they are gone. Nil once nothing retires: no strategy.
func (r *WebAppReconciler) retiringWithoutStrategy(ctx context.Context, app *webappv2.WebApp, o observed) *canaryRun {
	if st := app.Status.Canary; st == nil || st.CanaryRevision == "" && st.RetiringRevision == "" && (st.FailedRevision == "" || st.StepStartedAt == nil) {
		// Nothing ran, and nothing retires (a status we wrote since, which the cache has not seen, retires no more).
		return nil
	}
	run := &canaryRun{retireOnly: true}
	if o.trafficErr != nil {
		run.err = o.trafficErr
		return run
	}
	st, err := r.canaryStatus(ctx, app)
	if err != nil {
		run.err = err
		return run
	}
	if st == nil {
		return nil
	}
	// The state as the status keeps it (stateOf fits it to a plan, and there is none now).
	state := storedState(st)
	if run.canaryObjs, err = r.retiringCanaryObjects(ctx, app); err != nil {
		run.err = err
		return run
	}
	// Without a Gateway, a canary with a Service of its own was a blue/green's, whose switch (the one Service's
	// selector) may have sent its pods the traffic: they retire first, as behind a route.
	shared := desired.CanaryShared(app) && run.canaryObjs.svc == nil && !o.traffic.service && st.RetiringRevision == ""
	// The strategy's retireSeconds, as the status kept it (it went with the strategy).
	run.plan.Retire = time.Duration(st.RetireSeconds) * time.Second
	d := canary.Dropped(state, st.Phase == string(canary.PhasePromoting), shared, run.plan.RetireAfter(), canary.Observation{TrafficOnCanary: o.traffic.onCanary(), TrafficLeft: o.traffic.changed}, o.now)
	if d.State.Retiring == "" {
		return nil
	}
	run.state, run.decision = state, d
	run.retiring, run.retiringSvc = retiringObjects(run.canaryObjs, d.State.Retiring)
	return run
}

// decide is the canary's next state, from what observeCanary read: the step machine's decision and, while the
// stable version keeps serving beside a canary or after a rollback, its pod template.
func (run *canaryRun) decide(now time.Time) {
	if run == nil || run.err != nil || run.retireOnly {
		// (Without a strategy, retiringWithoutStrategy has decided.)
		return
	}
	run.decision = canary.Next(run.plan, run.state, run.seen, now)
	run.hold = run.decision.Phase == canary.PhaseCanary || run.decision.Phase == canary.PhaseRolledBack
	if run.hold {
		run.held = heldStable(run.record, run.stable, run.decision.State.Stable)
	}
	if run.decision.Phase == canary.PhasePromoting {
		// Only the record's own (never the Deployment's, which rolls to the promoted version now).
		run.kept = heldTemplate(run.record, run.decision.State.Stable)
	}
	if run.decision.Warm != "" {
		run.warm = heldTemplate(run.record, run.decision.Warm)
	}
	run.retiring, run.retiringSvc = retiringObjects(run.canaryObjs, run.decision.State.Retiring)
}

// retiringObjects are the canary's Deployment and Service as our manager owns them, when the Deployment runs rev,
// the version whose pods retire (nil otherwise: there is nothing of it to keep; the Service nil when there is none).
func retiringObjects(objs canaryObjects, rev string) (*appsv1ac.DeploymentApplyConfiguration, *corev1ac.ServiceApplyConfiguration) {
	if rev == "" || objs.dep == nil || objs.dep.Annotations[webappv2.AnnotationRevision] != rev {
		return nil, nil
	}
	owned, err := appsv1ac.ExtractDeployment(objs.dep, webappv2.FieldManager)
	if err != nil || owned.Spec == nil {
		return nil, nil
	}
	if objs.svc == nil {
		return owned, nil
	}
	svc, err := corev1ac.ExtractService(objs.svc, webappv2.FieldManager)
	if err != nil || svc.Spec == nil {
		return owned, nil
	}
	return owned, svc
}

// stableTemplateSources reads where the stable version's pod template is kept (heldStable): its record, and app's
// stable Deployment, read from the API server when the cache has not seen our last write of it and the record may
// not hold the revision the decision keeps (one of keep).
func (r *WebAppReconciler) stableTemplateSources(ctx context.Context, app *webappv2.WebApp, stable *appsv1.Deployment, keep []string) (*appsv1.ControllerRevision, *appsv1.Deployment) {
	var record *appsv1.ControllerRevision
	key := types.NamespacedName{Namespace: app.Namespace, Name: stableRecordName(app)}
	if cr := (&appsv1.ControllerRevision{}); r.Client.Get(ctx, key, cr, client.UnsafeDisableDeepCopy) == nil && ssa.NotOursReason(cr, app) == "" {
		record = cr
	}
	if stable == nil || record != nil && !slices.ContainsFunc(keep, func(rev string) bool { return rev != "" && rev != record.Annotations[webappv2.AnnotationRevision] }) {
		return record, stable
	}
	if r.mem.Behind("Deployment", client.ObjectKeyFromObject(app), stable) {
		fresh := &appsv1.Deployment{}
		if err := r.reader().Get(ctx, client.ObjectKeyFromObject(stable), fresh); err == nil {
			stable = fresh
		}
	}
	return record, stable
}

// heldStable is the pod template of the stable version (revision rev), which the stable Deployment keeps while a
// canary holds it: its record's (stable_record.go); without one (a canary begun before records were kept, or a
// WebApp that took the strategy while its Deployment ran another version), the template our manager owns on the
// stable Deployment, applied as it is. Nil: not known.
func heldStable(record *appsv1.ControllerRevision, stable *appsv1.Deployment, rev string) *corev1ac.PodTemplateSpecApplyConfiguration {
	if t := heldTemplate(record, rev); t != nil {
		return t
	}
	if stable == nil {
		return nil
	}
	if owned, err := appsv1ac.ExtractDeployment(stable, webappv2.FieldManager); err == nil && owned.Spec != nil && owned.Spec.Template != nil {
		return owned.Spec.Template
	}
	return nil
}

// checksWanted: the checks are queried for what was observed: a canary ready at its step, which some check gates,
// whose pods show no trouble (trouble rolls it back whatever the checks say, so it never waits behind them), and
// whose traffic has reached it: a second after the step's warm-up from when it was first seen ready (s.Since, as the
// status keeps it), never in the reconcile that finds it ready or writes its weight. So a blue/green's checks of the
// keep measure the production traffic, not the preview.
func checksWanted(plan canary.Plan, s canary.State, obs canary.Observation, now time.Time) bool {
	return plan.ChecksAt(s.Step) && obs.CanaryReady && obs.TroubleReason == "" && !s.Since.IsZero() &&
		!now.Before(s.Since.Add(plan.Warmup()+time.Second))
}

// queryChecks evaluates checks at now, in their order, all at once under one bound (checks.Timeout): a round takes
// as long as its slowest check, never the sum, so hanging checks hold the reconcile's worker 5 s at most. A check
// whose gates entry is false is not queried (its result says so, and is never counted).
func queryChecks(ctx context.Context, rt http.RoundTripper, checkSpecs []webappv2.CanaryCheck, gates []bool, headers []webhookHeaders, req checks.CheckRequest, now time.Time) []canary.CheckResult {
	ctx, cancel := context.WithTimeout(ctx, checks.Timeout)
	defer cancel()
	out := make([]canary.CheckResult, len(checkSpecs))
	var wg sync.WaitGroup
	for i, c := range checkSpecs {
		if i < len(gates) && !gates[i] {
			out[i] = canary.CheckResult{Skipped: true}
			continue
		}
		wg.Go(func() {
			switch {
			case c.Webhook != nil && i < len(headers) && headers[i].err != nil:
				// A header's Secret could not be read: the check fails, saying which.
				out[i] = canary.CheckResult{Err: headers[i].err}
			case c.Webhook != nil:
				req := req
				req.Check = c.Name
				var h http.Header
				if i < len(headers) {
					h = headers[i].header
				}
				out[i] = checks.Webhook(ctx, rt, c.Webhook.URL, time.Duration(c.Webhook.TimeoutSeconds)*time.Second, h, req)
			case c.Prometheus != nil:
				out[i] = checks.Query(ctx, rt, c.Prometheus.Address, c.Prometheus.Query, now)
			default:
				// (The CRD requires one of them.)
				out[i] = canary.CheckResult{Err: fmt.Errorf("check %s has neither prometheus nor webhook", c.Name)}
			}
		})
	}
	wg.Wait()
	return out
}

// webhookHeaders are a webhook check's headers, or why they could not be had.
type webhookHeaders struct {
	header http.Header
	err    error
}

// webhookHeaders reads the headers of each webhook check of checkSpecs, in order: a value from the spec as it is,
// one from a Secret of namespace ns read from the API server (uncached, as the pods' Secrets are). A Secret or key
// that is not there fails that check, naming them (never the value); another error reading one is transient, and
// returned.
func (r *WebAppReconciler) webhookHeaders(ctx context.Context, ns string, checkSpecs []webappv2.CanaryCheck) ([]webhookHeaders, error) {
	out := make([]webhookHeaders, len(checkSpecs))
	for i, c := range checkSpecs {
		if c.Webhook == nil || len(c.Webhook.Headers) == 0 {
			continue
		}
		h := http.Header{}
		for _, hd := range c.Webhook.Headers {
			v := hd.Value
			if ref := hd.SecretKeyRef; ref != nil {
				secret := &corev1.Secret{}
				if err := r.reader().Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, secret); err != nil {
					if !apierrors.IsNotFound(err) {
						return nil, fmt.Errorf("reading Secret %s for webhook header %s: %w", ref.Name, hd.Name, err)
					}
					out[i].err = fmt.Errorf("webhook header %s: Secret %s: %w", hd.Name, ref.Name, err)
					break
				}
				data, ok := secret.Data[ref.Key]
				if !ok {
					out[i].err = fmt.Errorf("webhook header %s: Secret %s has no key %s", hd.Name, ref.Name, ref.Key)
					break
				}
				v = string(data)
			}
			h.Add(hd.Name, v)
		}
		out[i].header = h
	}
	return out, nil
}

// canaryReadinessGrace is how long a canary's container may run unready before its failing readiness probe rolls
// it back: an app that starts slowly refuses its first probes (the other troubles roll back at once).
const canaryReadinessGrace = 30 * time.Second

// settledProbes are the failed probes of the pods that have run for canaryReadinessGrace.
func settledProbes(podList []*pods.Pod, probes pods.ProbeFailures, now time.Time) pods.ProbeFailures {
	out := pods.ProbeFailures{}
	for _, p := range podList {
		if words := probes[p.UID]; words != "" && now.Sub(pods.RunningSince(p)) >= canaryReadinessGrace {
			out[p.UID] = words
		}
	}
	return out
}

// canaryPendingGrace is how long a canary's pod may wait for a node before that rolls the canary back: its pods
// come on top of the stable ones, and a cluster autoscaler may need a minute to add a node.
const canaryPendingGrace = time.Minute

// settledPods are pods less those that wait for a node since less than canaryPendingGrace.
func settledPods(podList []*pods.Pod, now time.Time) []*pods.Pod {
	out := make([]*pods.Pod, 0, len(podList))
	for _, p := range podList {
		if reason, _ := pods.OneTrouble(p); reason == webappv2.ReasonUnschedulable && now.Sub(p.CreationTimestamp.Time) < canaryPendingGrace {
			continue
		}
		out = append(out, p)
	}
	return out
}

// canaryState is the state app's status keeps: the status we last wrote when the cache has not seen it yet.
func (r *WebAppReconciler) canaryState(ctx context.Context, app *webappv2.WebApp, plan canary.Plan, revision string) (canary.State, error) {
	st, err := r.canaryStatus(ctx, app)
	if err != nil {
		return canary.State{}, err
	}
	return stateOf(st, plan, revision), nil
}

// canaryStatus is app's status.canary: the one we last wrote when the cache has not seen it yet.
func (r *WebAppReconciler) canaryStatus(ctx context.Context, app *webappv2.WebApp) (*webappv2.CanaryStatus, error) {
	key := client.ObjectKeyFromObject(app)
	if !r.mem.Behind("WebAppStatus", key, app) {
		return app.Status.Canary, nil
	}
	live := &webappv2.WebApp{}
	if err := r.reader().Get(ctx, key, live); err != nil {
		return nil, &ssa.Error{Kind: "WebApp", Key: key, Err: err, Read: true}
	}
	return live.Status.Canary, nil
}

// cachedDeploymentOf is app's Deployment of that name as the cache has it, if app controls it (nil otherwise).
func (r *WebAppReconciler) cachedDeploymentOf(ctx context.Context, app *webappv2.WebApp, name string) *appsv1.Deployment {
	dep := r.cachedDeployment(ctx, types.NamespacedName{Namespace: app.Namespace, Name: name})
	if pods.OwnedDeployment(app, dep) == "" {
		return nil
	}
	return dep
}

// hasCanaryService: app's canary Service exists in the cache, and app controls it.
func (r *WebAppReconciler) hasCanaryService(ctx context.Context, app *webappv2.WebApp) bool {
	c := childOf("Service/canary")
	if c == nil {
		return false
	}
	obj, _ := r.cachedChild(ctx, *c, app)
	return obj != nil
}

// runs: dep is of revision and its controller has seen its spec.
func runs(dep *appsv1.Deployment, revision string) bool {
	return dep != nil && dep.Annotations[webappv2.AnnotationRevision] == revision && dep.Status.ObservedGeneration >= dep.Generation
}

// deployedRevision is the revision the stable Deployment runs: its annotation, or for one written before the
// strategy was taken, the spec's revision when the template our manager owns is the spec's, another otherwise ("":
// none runs).
func deployedRevision(dep *appsv1.Deployment, want *corev1ac.PodTemplateSpecApplyConfiguration, rev string) string {
	if dep == nil {
		return ""
	}
	if r := dep.Annotations[webappv2.AnnotationRevision]; r != "" {
		return r
	}
	owned, err := appsv1ac.ExtractDeployment(dep, webappv2.FieldManager)
	if err != nil || owned.Spec == nil || owned.Spec.Template == nil {
		return "unknown"
	}
	if same, err := ssa.OwnedFieldsMatch[corev1.PodTemplateSpec](want, owned.Spec.Template); err == nil && same {
		return rev
	}
	other, err := desired.Revision(owned.Spec.Template)
	if err != nil {
		return "unknown"
	}
	return other
}

// tellCanary records an event when the canary starts, moves to another step, is promoted or rolled back.
func (r *WebAppReconciler) tellCanary(app *webappv2.WebApp, run *canaryRun) {
	if run == nil || run.err != nil {
		return
	}
	was, d, s := run.state, run.decision, run.decision.State
	if run.retireOnly {
		// The strategy taken out: only the retiring pods are told.
		if s.Retiring != "" && s.Retiring == was.Canary {
			r.tellRetiring(app, s, run.plan.RetireAfter())
		}
		return
	}
	switch {
	case d.Phase == canary.PhaseRolledBack && was.Canary != "":
		r.event(app, nil, corev1.EventTypeWarning, webappv2.ReasonRolledBack, "Canary", "Rolled back revision %s (%s): %s", s.Failed, s.Reason, pods.TruncateTo(s.Message, 800))
	case d.Phase == canary.PhasePromoting && s.WayBack() && was.Canary == "":
		r.event(app, nil, corev1.EventTypeWarning, webappv2.ReasonRolledBack, "Canary", "Rolled back to revision %s: %s", s.Canary, s.Message)
	case d.Phase == canary.PhaseStable && s.Reason == webappv2.ReasonRolledBackToPrevious && was.WayBack() && s.Stable == was.Canary:
		r.event(app, nil, corev1.EventTypeNormal, "RolledBackToPrevious", "Canary", "The Deployment runs revision %s again: the traffic left the pods kept warm", s.Stable)
	case d.Phase == canary.PhaseStable && s.Reason == webappv2.ReasonRolledBackToPrevious && s.Stable != was.Stable:
		r.event(app, nil, corev1.EventTypeWarning, webappv2.ReasonRolledBack, "Canary", "Rolled back to revision %s: %s", s.Stable, s.Message)
	case d.Phase == canary.PhaseStable && was.Canary != "" && s.Stable == was.Canary:
		r.event(app, nil, corev1.EventTypeNormal, "Promoted", "Canary", "Revision %s is promoted: it serves all the traffic", s.Stable)
	case d.Phase == canary.PhaseCanary && s.Canary != was.Canary:
		r.event(app, nil, corev1.EventTypeNormal, "CanaryStarted", "Canary", "Canary of revision %s started beside revision %s", s.Canary, s.Stable)
	case d.Phase == canary.PhasePromoting && was.Step < len(run.plan.Steps):
		r.event(app, nil, corev1.EventTypeNormal, "Promoting", "Canary", "Revision %s passed every step: rolling the Deployment to it", s.Canary)
	case d.Phase == canary.PhaseCanary && s.Step != was.Step:
		r.event(app, nil, corev1.EventTypeNormal, "CanaryStep", "Canary", "Revision %s passed step %d of %d", s.Canary, was.Step+1, len(run.plan.Steps))
	}
	if s.Retiring != "" && s.Retiring == was.Canary {
		r.tellRetiring(app, s, run.plan.RetireAfter())
	}
}

// tellRetiring records an event when the spec leaves a canary whose pods then retire.
func (r *WebAppReconciler) tellRetiring(app *webappv2.WebApp, s canary.State, after time.Duration) {
	r.event(app, nil, corev1.EventTypeNormal, "CanaryLeft", "Canary", "The spec left revision %s: no traffic is sent to it from now on, and its pods go at %s",
		s.Retiring, s.RetiringSince.Add(after).UTC().Format(time.RFC3339))
}

// desiredStableDeployment is the WebApp's own Deployment: the spec's, or with a canary the stable version's,
// carrying its revision.
func desiredStableDeployment(app *webappv2.WebApp, in inputs) (*appsv1ac.DeploymentApplyConfiguration, error) {
	dep, err := desired.Deployment(app, in.Inputs)
	if err != nil {
		return nil, err
	}
	if _, ok, err := in.canary.decided(); !ok {
		// No strategy: the spec's (nil error), or the canary undecided: left as it is.
		if err != nil {
			return nil, err
		}
		return dep, nil
	}
	rev := in.canary.revision
	switch {
	case in.canary.hold && in.canary.held == nil:
		// Never the untried (or failed) version in its place: the stable one's template is not known.
		return nil, errStableUnknown
	case in.canary.hold:
		dep.Spec.Template = in.canary.held
		rev = in.canary.decision.State.Stable
	}
	return dep.WithAnnotations(map[string]string{webappv2.AnnotationRevision: rev}), nil
}

// errStableUnknown stops the stable Deployment's write while a canary holds it and its template is gone.
var errStableUnknown = errors.New("the stable version's pod template is not known (neither its record, ControllerRevision <name>-stable, nor our fields on its Deployment can be read) " +
	"while spec.rollout.canary holds it: set the spec back to the stable version, or remove spec.rollout.canary to run the spec's version")

// buildCanaryDeployment is the canary variant of the Deployment (nil: none must exist).
func buildCanaryDeployment(app *webappv2.WebApp, in inputs) (*appsv1ac.DeploymentApplyConfiguration, error) {
	if in.canary.keptUnderTraffic() {
		return nil, errTrafficOnCanary
	}
	if dep := in.canary.retiringDeployment(); dep != nil {
		// The pods of a version the spec left retire as they are: the route already sends them nothing.
		return dep, nil
	}
	if _, ok, err := in.canary.decided(); !ok {
		return nil, heldUnderTraffic(in, err)
	}
	dep, err := desired.CanaryDeployment(app, in.Inputs, in.canary.decision, in.canary.stableReplicas, in.canary.warm)
	if dep == nil && err == nil {
		return nil, heldUnderTraffic(in, nil)
	}
	if dep != nil && err == nil && in.claimErr != nil {
		// Its pods would mount a claim that cannot be the WebApp's (or one that could not be read): held as it is.
		return nil, in.claimErr
	}
	return dep, err
}

// errTrafficOnCanary holds a canary's objects that are to go while the traffic has not left them.
var errTrafficOnCanary = errors.New("the WebApp's Service or route, as last applied, still sends the canary's pods traffic; they go once the write that takes it off them has succeeded")

// heldUnderTraffic is the error of a canary object's builder that found it must not exist: err (nil: none), or,
// while the WebApp's Service or route still send the canary traffic, errTrafficOnCanary, which leaves the object as
// it is: a canary's pods are never deleted under traffic, whatever the decision (one that could not be written yet).
func heldUnderTraffic(in inputs, err error) error {
	if err == nil && in.traffic.onCanary() {
		return errTrafficOnCanary
	}
	return err
}

// appliedTrafficOf is readCanaryTraffic while a canary Deployment of app's exists (without one, there are no pods to
// hold or retire).
func (r *WebAppReconciler) appliedTrafficOf(ctx context.Context, app *webappv2.WebApp) (appliedTraffic, error) {
	if r.cachedDeploymentOf(ctx, app, desired.CanaryName(app)) == nil {
		return appliedTraffic{}, nil
	}
	return r.readCanaryTraffic(ctx, app)
}

// buildCanaryService is the canary variant of the Service (nil: none must exist).
func buildCanaryService(app *webappv2.WebApp, in inputs) (*corev1ac.ServiceApplyConfiguration, error) {
	if in.canary.keptUnderTraffic() {
		return nil, errTrafficOnCanary
	}
	if in.canary.retiringDeployment() != nil {
		// Its retiring pods' (the gateway may still send them a request), as it is.
		return in.canary.retiringSvc, nil
	}
	d, ok, err := in.canary.decided()
	if !ok {
		return nil, heldUnderTraffic(in, err)
	}
	if svc := desired.CanaryService(app, d); svc != nil {
		return svc, nil
	}
	return nil, heldUnderTraffic(in, nil)
}

// buildPreviewRoute is the preview variant of the HTTPRoute (nil: none must exist).
func buildPreviewRoute(app *webappv2.WebApp, in inputs) (*gwv1ac.HTTPRouteApplyConfiguration, error) {
	d, ok, err := in.canary.decided()
	if !ok {
		return nil, err
	}
	return desired.PreviewRoute(app, d), nil
}

// buildPreviewIngress is the preview variant of the Ingress (nil: none must exist).
func buildPreviewIngress(app *webappv2.WebApp, in inputs) (*networkingv1ac.IngressApplyConfiguration, error) {
	d, ok, err := in.canary.decided()
	if !ok {
		return nil, err
	}
	return desired.PreviewIngress(app, d), nil
}

// heldReplicas is the count a blue/green's switch holds as the HPA's floor (0: none); an error when app's
// blue/green could not be decided, and its floor is not known.
func heldReplicas(app *webappv2.WebApp, in inputs) (int32, error) {
	d, ok, err := in.canary.decided()
	if !ok && err != nil && app.Spec.Rollout.Canary != nil && app.Spec.Rollout.Canary.BlueGreen != nil {
		return 0, err
	}
	return d.State.Held, nil
}

// canaryTraffic is the traffic the route sends to the canary (none: the stable Service alone).
func canaryTraffic(in inputs) (canary.Traffic, error) {
	d, _, err := in.canary.decided()
	return d.Traffic, err
}

// keptUnderTraffic: run's decision keeps the canary's pods only because the Service or route, as last applied, still
// send them traffic (a write that takes it off them has not succeeded): their objects are left as they are, and
// Ready says why.
func (run *canaryRun) keptUnderTraffic() bool {
	return run != nil && run.err == nil && run.decision.HeldUnderTraffic
}

// retiringDeployment is the Deployment of a canary whose pods retire, as our manager owns it (nil: none retires).
func (run *canaryRun) retiringDeployment() *appsv1ac.DeploymentApplyConfiguration {
	if run == nil || run.err != nil || run.decision.State.Retiring == "" {
		return nil
	}
	return run.retiring
}

// decided is run's decision; ok is false without a strategy (run nil or retireOnly, err nil) or when the canary
// could not be decided (err says why: its objects are left as they are).
func (run *canaryRun) decided() (d canary.Decision, ok bool, err error) {
	switch {
	case run == nil:
		return d, false, nil
	case run.err != nil:
		// (A strategy taken out whose retiring objects could not be read too: they are left as they are.)
		return d, false, run.err
	case run.retireOnly:
		return d, false, nil
	}
	return run.decision, true, nil
}

// checkRounds runs canaries' checks apart from the reconcile: a reconcile that finds a WebApp's checks due starts
// a round in the background and goes on; the round's checks are queried at once under one checks.Timeout bound, and
// when it ends its results wait for the WebApp's next reconcile, which the round's end brings (wake). So a worker is
// never held by a check, however many hang, and a canary's pod trouble is never decided behind one. One round per
// WebApp at a time; after a restart the checks are due at once.
type checkRounds struct {
	mu      sync.Mutex
	last    map[types.NamespacedName]checkedAt  // when each WebApp's last round started
	running map[types.NamespacedName]bool       // a round is under way
	done    map[types.NamespacedName]checkRound // rounds ended, their results not yet taken
	// wake has a WebApp reconciled once its round ended (nil: no one is told; its next resync takes the results).
	wake func(types.NamespacedName)
}

type checkedAt struct {
	revision string
	step     int
	at       time.Time
}

// checkRound is an ended round: when it started, for which canary and step, and each check's result.
type checkRound struct {
	checkedAt
	results []canary.CheckResult
}

// due reports whether key's checks are due at now (and if so, takes them as started): at the first look at a
// step, every interval, and once the step's pause is over (at pauseEnd; zero: its pause has not started); never
// while a round is under way.
func (c *checkRounds) due(key types.NamespacedName, revision string, step int, interval time.Duration, pauseEnd, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running[key] {
		return false
	}
	last, ok := c.last[key]
	pauseOver := !pauseEnd.IsZero() && !now.Before(pauseEnd) && last.at.Before(pauseEnd)
	if ok && last.revision == revision && last.step == step && now.Sub(last.at) < interval && !pauseOver {
		return false
	}
	if c.last == nil {
		c.last = map[types.NamespacedName]checkedAt{}
	}
	c.last[key] = checkedAt{revision: revision, step: step, at: now}
	return true
}

// start runs a round for key (due said so) in the background: query has each check's result, under its own bound.
func (c *checkRounds) start(ctx context.Context, key types.NamespacedName, revision string, step int, now time.Time, query func(context.Context) []canary.CheckResult) {
	c.mu.Lock()
	if c.running == nil {
		c.running = map[types.NamespacedName]bool{}
	}
	c.running[key] = true
	c.mu.Unlock()
	// Not the reconcile's context: the round outlives the reconcile that started it (queryChecks bounds it).
	ctx = context.WithoutCancel(ctx)
	go func() {
		results := query(ctx)
		c.mu.Lock()
		delete(c.running, key)
		if _, known := c.last[key]; known {
			// (Forgotten meanwhile: its WebApp is gone, and nobody will take the results.)
			if c.done == nil {
				c.done = map[types.NamespacedName]checkRound{}
			}
			c.done[key] = checkRound{checkedAt: checkedAt{revision: revision, step: step, at: now}, results: results}
		}
		wake := c.wake
		c.mu.Unlock()
		if wake != nil {
			wake(key)
		}
	}()
}

// take returns key's ended round for revision and step, once (a round of another canary or step is dropped).
func (c *checkRounds) take(key types.NamespacedName, revision string, step int) (checkRound, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.done[key]
	if !ok {
		return r, false
	}
	delete(c.done, key)
	return r, r.revision == revision && r.step == step
}

// forget drops what is known of key (its WebApp is gone); a round under way ends unseen.
func (c *checkRounds) forget(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.last, key)
	delete(c.done, key)
}

func (r *WebAppReconciler) checkTransport() http.RoundTripper {
	if r.CheckTransport != nil {
		return r.CheckTransport
	}
	return http.DefaultTransport
}

// running: a canary runs, or a rolled-back one's pods retire (its decision may change with time alone, not only
// with an event).
func (run *canaryRun) running() bool {
	return run.observed().Running()
}

// observed is the run as the status reports it (nil: no strategy).
func (run *canaryRun) observed() *status.Canary {
	if run == nil {
		return nil
	}
	return &status.Canary{Decided: run.err == nil, Decision: run.decision, Plan: run.plan}
}

// canaryStateChanged: the canary's state c decided differs from stored (its status must be written, never held back: the
// children were written by it).
func canaryStateChanged(c *status.Canary, stored *webappv2.CanaryStatus) bool {
	if c == nil || !c.Decided {
		return false
	}
	if stored == nil {
		return true
	}
	same, err := ssa.OwnedFieldsMatch[webappv2.CanaryStatus](status.CanaryStatus(c.Decision, c.Plan), stored)
	return err != nil || !same
}

// splitPods tells a WebApp's pods of the stable version from the canary's (by LabelCanaryOf).
func splitPods(app *webappv2.WebApp, podList []*pods.Pod) (stable, canary []*pods.Pod) {
	for _, p := range podList {
		if p.Labels[webappv2.LabelCanaryOf] == app.Name {
			canary = append(canary, p)
		} else {
			stable = append(stable, p)
		}
	}
	return stable, canary
}

// canaryReplaced: the canary Deployment cur runs another version than desired, the one to try now. It is replaced
// (deleted, then created by the next reconcile) rather than rolled: the version it runs is no longer wanted, so its
// pods go at once, and never keep serving (behind the one Service, without a Gateway) beside a new version the
// Deployment API refuses, which an apply could never replace.
func canaryReplaced(cur client.Object, desired any) bool {
	want, ok := desired.(*appsv1ac.DeploymentApplyConfiguration)
	if !ok || want == nil {
		return false
	}
	have := cur.GetAnnotations()[webappv2.AnnotationRevision]
	return have != "" && have != want.Annotations[webappv2.AnnotationRevision]
}
