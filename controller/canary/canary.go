// Package canary is the canary's step machine (spec.rollout.canary): a pure function of the plan (the spec's
// strategy, defaults applied), the state the rollout has reached (kept in the WebApp's status, so a restart or a
// leader change resumes it at the same step) and what a reconcile observed. It decides the next state and the
// traffic the canary gets; the reconciler (controller/canary_run.go) observes both versions, runs the checks and hands
// the decision to the builders, which turn it into both Deployments, both Services and the route's weights. It does
// no I/O: the lint config refuses a client, cache or HTTP import here.
package canary

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	webappv2 "github.com/example/webapp-operator/apis/v2"
)

// Plan is a canary strategy with its defaults applied.
type Plan struct {
	Steps  []Step
	Checks []Check
	// BlueGreen: the steps are a blue/green's two, the preview with no weight (at full size, or a share of it), then
	// the switch at 100 at full size.
	BlueGreen bool
	// RollbackWindow is how long after a promotion a spec set back to the version it replaced is rolled back to at
	// once, without a canary (0: never).
	RollbackWindow time.Duration
	// Shared: no route splits the traffic; the canary's pods are behind the one Service, which they leave as any
	// pod going does (so a canary the spec leaves has nothing to retire from).
	Shared bool
	// KeepWarm: through the rollback window, the version the last promotion replaced runs in the canary's
	// Deployment at full size with none of the traffic, and a spec set back to it sends it all the traffic at once
	// (only behind a route, or a blue/green's Service switch: never with Shared).
	KeepWarm bool
	// Switched: a blue/green without a Gateway, whose switch is the WebApp's Service's selector. No gateway learns
	// the new pods' endpoints first: the proxies take them with the selector, so the traffic follows a step's
	// readiness with no warm-up.
	Switched bool
	// Retire is how long a canary's pods stay after the traffic left them (0: the default, Retire).
	Retire time.Duration
}

// RetireAfter is how long the plan's canary pods stay after the traffic left them: its Retire, or the default.
func (p Plan) RetireAfter() time.Duration {
	if p.Retire > 0 {
		return p.Retire
	}
	return Retire
}

// The kinds of strategy a plan is (status.canary.strategy says which one a canary runs).
const (
	KindSteps     = "Steps"
	KindBlueGreen = "BlueGreen"
)

// Kind is the kind of strategy the plan is.
func (p Plan) Kind() string {
	if p.BlueGreen {
		return KindBlueGreen
	}
	return KindSteps
}

// Warmup is how long after a step's pods are ready its traffic reaches them: Warmup behind a route, none when a
// blue/green's Service switches.
func (p Plan) Warmup() time.Duration {
	if p.Switched {
		return 0
	}
	return Warmup
}

// Step sends weight percent of the traffic to the canary, then pauses: the canary must be ready at that
// weight, and the pause run out with every check passing, before the next step.
type Step struct {
	Weight int32
	Pause  time.Duration
	// Gate: the step then waits for a person; GateTimeout ends the wait (0: never), as OnTimeout says.
	Gate        bool
	GateTimeout time.Duration
	OnTimeout   webappv2.GateTimeout
	// Matches send the requests that meet one of them to the canary, whatever the weight; Mirror copies that
	// percent of the requests to it as well.
	Matches []webappv2.CanaryMatch
	Mirror  int32
	// Size is the share the canary's pods are counted for whatever its traffic (0: by its traffic): a blue/green's
	// steps, 100 (at full size), or its preview's previewPercent.
	Size int32
}

// GatewayFeatures are the Gateway API's features (as a GatewayClass's status.supportedFeatures names them) that the
// plan's route needs beyond the core: a mirror, and a mirror of a share when a step mirrors less than every request.
func (p Plan) GatewayFeatures() []string {
	var out []string
	for _, s := range p.Steps {
		if s.Mirror > 0 && !slices.Contains(out, FeatureMirror) {
			out = append(out, FeatureMirror)
		}
		if s.Mirror > 0 && s.Mirror < 100 && !slices.Contains(out, FeaturePercentageMirror) {
			out = append(out, FeaturePercentageMirror)
		}
	}
	return out
}

// The Gateway API's names of the features a mirror needs.
const (
	FeatureMirror           = "HTTPRouteRequestMirror"
	FeaturePercentageMirror = "HTTPRouteRequestPercentageMirror"
)

// Pods is the share of the traffic the step's canary pods are counted for: its weight and the mirrored share (a
// mirror copies requests of either version), at most all of it, and one pod's worth at least (a step of matches
// alone still needs a canary to answer); its Size for a step sized whatever its traffic.
func (s Step) Pods() int32 {
	if s.Size > 0 {
		return s.Size
	}
	return max(min(s.Weight+s.Mirror, 100), 1)
}

// Check is a query whose value must not exceed max; failuresAllowed failures are tolerated within one canary.
type Check struct {
	Name            string
	Max             float64
	Interval        time.Duration
	FailuresAllowed int32
	// Address and Query are the Prometheus server and the query, for the evaluations' record.
	Address, Query string
	// NoData is what no value counts as (webappv2.NoDataFail when ""); NoDataWait bounds NoDataWait.
	NoData     webappv2.CheckNoData
	NoDataWait time.Duration
	// Steps are the steps the check gates (nil: every one): a blue/green's check during its preview or its keep.
	Steps []int
}

// At says whether the check gates step i: it is queried and counted there.
func (c Check) At(i int) bool { return c.Steps == nil || slices.Contains(c.Steps, i) }

// ChecksAt says whether some check gates step i.
func (p Plan) ChecksAt(i int) bool {
	return slices.ContainsFunc(p.Checks, func(c Check) bool { return c.At(i) })
}

// Evaluation is a check's last result in a canary, as the status keeps it (the words of its value, not the value,
// so that what the status says and what it is read back as are the same).
type Evaluation struct {
	Name string
	// Value is the value in FormatValue's words ("" when the query gave none); Max the limit, likewise.
	Value, Max string
	Passed     bool
	// Error is why the value does not count ("" when it does).
	Error string
	// Address and Query are what produced it.
	Address, Query string
	// At is when the round that produced it started, to the second (as the status keeps times).
	At time.Time
	// NoDataSince is when a check waiting for data (NoDataWait) first gave no value in a row (zero: it gave one).
	NoDataSince time.Time
}

// Phase is where the rollout is.
type Phase string

const (
	// PhaseStable is no canary: the stable version serves everything.
	PhaseStable Phase = "Stable"
	// PhaseCanary is a canary running beside the stable version, at its step's weight.
	PhaseCanary Phase = "Canary"
	// PhasePromoting follows the last step: the stable Deployment is rolling to the canary's version.
	PhasePromoting Phase = "Promoting"
	// PhaseRolledBack is a canary stopped: the stable version serves everything until the spec changes.
	PhaseRolledBack Phase = "RolledBack"
)

// State is what the rollout has reached. It lives in the WebApp's status: it changes at a step's start and
// end, on a check's failure and on a rollback, never while a step pauses, so a pause costs no write.
type State struct {
	// stable is the revision (the pod template's hash) of the version that serves; canary the one being tried
	// ("" when none); failed the last one rolled back (re-applying it does not start it again).
	Stable, Canary, Failed string
	// step is the index of the canary's step; len(plan.steps) while promoting.
	Step int
	// since is when the step's pause started: when the canary was first seen ready at its weight (zero: not yet).
	Since time.Time
	// failures counts each check's failures in this canary, in the plan's order.
	Failures []int32
	// reason and message say why the last canary was rolled back (a pod trouble reason, or CheckFailed).
	Reason, Message string
	// GateSince is when the step's gate began to wait for a person (zero: not waiting).
	GateSince time.Time
	// ActedOn is the last action (the annotation's value) that took effect: a value acts once, so an action left in
	// place (or applied again from Git) never acts twice.
	ActedOn string
	// Previous is the version the last promotion replaced, known until PreviousUntil (the plan's rollback window).
	Previous      string
	PreviousUntil time.Time
	// Evaluations are each check's last result in this canary (the one rolled back, after a rollback), in the
	// plan's order at the time. They change when a round of checks ends, so a pause without checks costs no write.
	Evaluations []Evaluation
	// Retiring is a canary the spec left while the route sent it traffic, since RetiringSince: its pods stay as
	// they are, with none of the traffic, until Retire has passed (the gateway follows the route first).
	Retiring      string
	RetiringSince time.Time
	// Held is the stable count at a blue/green's switch, which an HPA's floor keeps (0: none held) from the switch
	// until the release ends: the stable pods serve nothing meanwhile, and the HPA, which measures them, would
	// shrink them, and the new version's count with them.
	Held int32
}

// Observation is what a reconcile saw of the two versions.
type Observation struct {
	// revision is the spec's pod template's; deployed the stable Deployment's ("" when it does not exist yet).
	Revision, Deployed string
	// canaryReady: the canary Deployment has as many available pods as its step's weight asks for.
	CanaryReady bool
	// NextStepReady: so has it for the next step, whose share asks for the same count (no event of its pods would
	// say so).
	NextStepReady bool
	// StableReplicas is the stable Deployment's count (an HPA's when it autoscales), which a blue/green's switch holds.
	StableReplicas int32
	// troubleReason and troubleMessage are the canary's pods' trouble (podTrouble), "" when none.
	TroubleReason, TroubleMessage string
	// checks are the results of the round of checks that ended since the last reconcile, in the plan's order (nil:
	// none ended); checksAt is when that round started.
	Checks   []CheckResult
	ChecksAt time.Time
	// stableRolledOut: the stable Deployment runs the canary's revision and its rollout is complete.
	StableRolledOut bool
	// GatewayLacks says what the plan needs of the Gateway that its class does not list as supported ("": it lists
	// all of it, or the plan needs nothing beyond the core): the canary is rolled back before the route asks for it.
	GatewayLacks string
	// StableKept: while promoting, the record still holds the stable version's pod template, so an abort can roll
	// the stable Deployment back to it.
	StableKept bool
	// Action is a person's action, as the WebApp's annotation webappv2.AnnotationAction says it: acted on once
	// (State.ActedOn), and only where it makes sense for the revision (and step) it names.
	Action string
	// Recorded is the revision whose pod template the stable version's record holds ("": none): the version a
	// promotion replaced is kept warm only from it.
	Recorded string
	// WarmReady: the canary's Deployment runs State.Previous with every pod ready at full size, behind a canary
	// Service of ours: a spec set back to it may be sent to them at once.
	WarmReady bool
	// TrafficOnCanary: the WebApp's Service or route, as our manager last applied them, send the canary's pods
	// traffic. Pods the decision took the traffic off stay while it holds: the write that takes it off them has not
	// succeeded yet (refused, say), and the gateway or the proxies still send them requests.
	TrafficOnCanary bool
	// TrafficLeft is when our manager last changed the WebApp's route, or its Service where that is a blue/green's
	// switch, by the API server's clock (zero: none of ours): pods the traffic left stay Retire after that write as
	// well, so a switch back written late (once a refusal is lifted) still gives the proxies their Retire.
	TrafficLeft time.Time
}

// MaxAction is the longest action value that acts (status.canary.actedOn keeps it whole).
const MaxAction = 256

// The actions (the values of webappv2.AnnotationAction) on the canary of a revision are PromoteStep, PromoteFull,
// Abort and Retry: what kubectl-webapp writes (with " at <time>" after, to make each new) and what Next acts on.

// PromoteStep is the action that passes the canary of revision at step.
func PromoteStep(revision string, step int) string {
	return fmt.Sprintf("promote %s/%d", revision, step)
}

// PromoteFull is the action that promotes the canary of revision all the way.
func PromoteFull(revision string) string { return "promote " + revision + "/full" }

// Abort is the action that rolls the canary of revision back.
func Abort(revision string) string { return "abort " + revision }

// Retry is the action that starts the rolled-back revision's canary again.
func Retry(revision string) string { return "retry " + revision }

// actionOf is the action a value says: its first two words (what follows makes a value new, and says nothing).
func actionOf(v string) string {
	if f := strings.Fields(v); len(f) >= 2 {
		return f[0] + " " + f[1]
	}
	return ""
}

// CheckResult is one evaluation of a check: its value, or why it could not be had (an error counts as a failure).
type CheckResult struct {
	Value float64
	Err   error
	// Skipped: not queried, the check not gating the step the round began at.
	Skipped bool
}

// Decision is what the step machine decided.
type Decision struct {
	State State
	Phase Phase
	// Traffic is what the route sends the canary: its step's once the canary is ready there, the step before's
	// until then (so a route never sends traffic to pods not ready for it).
	Traffic
	// replicaWeight is the share the canary's pods are counted for (0: no canary Deployment).
	ReplicaWeight int32
	// after is when to look again without an event (a pause's end, a check's interval); zero: on events only.
	After time.Duration
	// Warm is the version the last promotion replaced, kept running in the canary's Deployment (from the record's
	// pod template) with none of the traffic until its rollback window ends ("": none kept).
	Warm string
	// HeldUnderTraffic: the canary's pods, which the decision has taken the traffic off, stay only because the
	// Service or route, as last applied, still send them traffic (Observation.TrafficOnCanary): their objects are
	// left as they are until that write succeeds.
	HeldUnderTraffic bool
}

// Traffic is what the route sends the canary: weight percent (its share), every request of its matches, and a copy
// of mirror percent of the requests.
type Traffic struct {
	Weight  int32
	Matches []webappv2.CanaryMatch
	Mirror  int32
}

// None reports that the route sends the canary nothing.
func (t Traffic) None() bool { return t.Weight == 0 && len(t.Matches) == 0 && t.Mirror == 0 }

// Words say what the route sends the canary, e.g. "10% of the traffic, the requests with header X-Canary: always,
// and a copy of 50% of the requests".
func (t Traffic) Words() string {
	var parts []string
	if t.Weight > 0 || (len(t.Matches) == 0 && t.Mirror == 0) {
		parts = append(parts, fmt.Sprintf("%d%% of the traffic", t.Weight))
	}
	if len(t.Matches) > 0 {
		var ms []string
		for _, m := range t.Matches {
			ms = append(ms, MatchWords(m))
		}
		parts = append(parts, "the requests with "+strings.Join(ms, " or with "))
	}
	if t.Mirror > 0 {
		parts = append(parts, fmt.Sprintf("a copy of %d%% of the requests", t.Mirror))
	}
	if len(parts) > 1 {
		parts[len(parts)-1] = "and " + parts[len(parts)-1]
	}
	return strings.Join(parts, ", ")
}

// MatchWords say what a request must carry to meet m: "header X-Canary: always and cookie canary=always".
func MatchWords(m webappv2.CanaryMatch) string {
	var ws []string
	for _, h := range m.Headers {
		sep := ": "
		if h.Type == webappv2.HeaderRegularExpression {
			sep = " matching "
		}
		ws = append(ws, "header "+h.Name+sep+h.Value)
	}
	if c := m.Cookie; c != nil {
		ws = append(ws, "cookie "+c.Name+"="+c.Value)
	}
	return strings.Join(ws, " and ")
}

// Next decides the rollout's next state from the plan, the state reached and what was observed at now.
func Next(plan Plan, s State, obs Observation, now time.Time) Decision {
	left := s.Canary != "" && obs.Revision != s.Canary
	if left {
		// The spec left the canary (set back, or changed again): what follows is decided without it, its pods
		// retiring first if the route sent them traffic.
		s = abandon(plan, s, obs, now)
	}
	if s.rolledBackRetiring() && obs.Revision != s.Failed && !plan.Shared && s.Retiring == "" {
		// The spec left a rolled-back canary whose pods retire still: they finish retiring, as one it left.
		s.Retiring, s.RetiringSince, s.Step, s.Since = s.Failed, s.Since, 0, time.Time{}
	}
	return keepWarm(plan, obs, retire(next(plan, s, obs, now, left), plan.RetireAfter(), obs, now), now)
}

// keepWarm keeps the version the last promotion replaced running with none of the traffic, at full size, while
// the rollback window lasts (d.After brings the reconcile that lets it go): only when no canary runs or retires,
// and from the record of its pod template (which the promotion kept).
func keepWarm(plan Plan, obs Observation, d Decision, now time.Time) Decision {
	s := d.State
	left := s.PreviousUntil.Sub(now)
	if !plan.KeepWarm || plan.Shared || d.Phase != PhaseStable || s.Canary != "" || s.Retiring != "" || s.rolledBackRetiring() ||
		s.Previous == "" || obs.Recorded != s.Previous || left <= 0 {
		// (Until the window's end the promotion set, as the way back is open: a window shortened since, or a clock
		// ahead of ours, changes neither.)
		return d
	}
	d.Warm, d.ReplicaWeight = s.Previous, 100
	if d.After == 0 || left < d.After {
		d.After = left
	}
	return d
}

// abandon leaves s's canary, which the spec no longer asks for. The route sends it nothing from now on; its pods,
// if the route sent them traffic, retire: they stay Retire as they are, answering the requests already on their
// way (the gateway follows the route within moments), and a new version's canary starts in their place after.
// Being promoted, it is what the stable Deployment runs (or rolls to): stable, unless the spec is set back to the
// version before.
func abandon(plan Plan, s State, obs Observation, now time.Time) State {
	promoting := s.Step >= len(plan.Steps)
	if !plan.Shared && s.TrafficSent(promoting) {
		s.Retiring, s.RetiringSince = s.Canary, now
	}
	if s.WayBack() {
		// (What said it was rolled back to no longer holds.)
		s.Reason, s.Message = "", ""
	}
	if promoting && obs.Revision != s.Stable {
		// (Its promotion did not complete: no rollback window for the version it replaced.)
		s.Stable, s.Previous, s.PreviousUntil = s.Canary, "", time.Time{}
	}
	s.Canary, s.Step, s.Since, s.GateSince, s.Failures, s.Evaluations, s.Held = "", 0, time.Time{}, time.Time{}, nil, nil, 0
	return s
}

// Dropped decides for a strategy taken out of the spec at now, from the state it left (promoting: it was being
// promoted; shared: no route split the traffic). No canary runs from now on; the pods of the one that ran, if a route
// sent them traffic, retire first as those of a version the spec left do, and so do a rolled-back one's still
// retiring. Phase Stable, with nothing left to retire: the strategy's state is done with.
func Dropped(s State, promoting, shared bool, after time.Duration, obs Observation, now time.Time) Decision {
	// (No stable version is kept: the Deployment runs the spec's from now on, and a strategy set again takes what
	// it runs as stable.)
	out := State{Retiring: s.Retiring, RetiringSince: s.RetiringSince}
	switch {
	case shared:
		// (Behind the one Service, the pods leave it as any pod going does.)
		out.Retiring, out.RetiringSince = "", time.Time{}
	case s.Canary != "" && s.TrafficSent(promoting):
		out.Retiring, out.RetiringSince = s.Canary, now
	case s.rolledBackRetiring():
		out.Retiring, out.RetiringSince = s.Failed, s.Since
	}
	return retire(Decision{State: out, Phase: PhaseStable}, after, obs, now)
}

// TrafficSent reports whether the route has sent s's canary traffic (promoting: it is being promoted): from its
// first step's pods ready (the step before's traffic at a later step) through the promotion. Before, it sent it
// nothing, and its pods have nothing to retire from.
func (s State) TrafficSent(promoting bool) bool {
	return promoting || s.Step > 0 || !s.Since.IsZero()
}

// WayBack reports that s's canary is the version the last promotion replaced, which the spec was set back to within the
// rollback window with its pods kept warm: it takes all the traffic while the stable Deployment rolls back to it.
func (s State) WayBack() bool {
	return s.Canary != "" && s.Reason == webappv2.ReasonRolledBackToPrevious
}

// rolledBackRetiring: s is a rolled-back canary whose pods retire still (since Since, the rollback).
func (s State) rolledBackRetiring() bool {
	return s.Canary == "" && s.Failed != "" && !s.Since.IsZero()
}

// retire keeps a retiring canary's pods while stay says (d.After brings the reconcile that lets them go), and forgets
// them then, or once the spec asks for their version again (they are its canary's).
func retire(d Decision, after time.Duration, obs Observation, now time.Time) Decision {
	s := &d.State
	if s.Retiring == "" {
		return d
	}
	if s.Retiring == s.Canary || s.RetiringSince.Sub(now) > max(after, Retire) {
		// (A since far in the future, from a clock far ahead of ours, holds them no longer.)
		s.Retiring, s.RetiringSince = "", time.Time{}
		return d
	}
	if !d.None() {
		// The canary's Service carries the next canary's traffic (its pods retired already, say deleted by someone):
		// the route's or the Service's traffic and writes are the next one's, not the retiring pods'.
		obs.TrafficOnCanary, obs.TrafficLeft = false, time.Time{}
	}
	keep, left := stay(s.RetiringSince, after, obs, now)
	if !keep {
		s.Retiring, s.RetiringSince = "", time.Time{}
		return d
	}
	d.HeldUnderTraffic = left == 0
	if left > 0 && (d.After == 0 || left < d.After) {
		d.After = left
	}
	return d
}

// stay reports whether pods the traffic left at since stay, and how long (0: until an event; a refused write's retry
// brings the reconcile back): after (the plan's retire) past since, after past our last write of the route or the
// switch (obs.TrafficLeft: the write that took the traffic off them, however late it succeeded), and as long as the
// route or the switch, as we last applied them, still send them traffic (obs.TrafficOnCanary). A clock a little
// ahead of ours (a leader before this one, the API server's) holds them after at most from now; one more than
// Retire (or after, if longer) ahead, not at all.
func stay(since time.Time, after time.Duration, obs Observation, now time.Time) (bool, time.Duration) {
	left := min(since.Add(after).Sub(now), after)
	if t := obs.TrafficLeft; !t.IsZero() && t.Sub(now) <= max(after, Retire) {
		left = max(left, min(t.Add(after).Sub(now), after))
	}
	if left > 0 {
		return true, left
	}
	return obs.TrafficOnCanary, 0
}

// next is Next for a state whose canary, if any, is the spec's version; left: the spec has just left another one.
func next(plan Plan, s State, obs Observation, now time.Time, left bool) Decision {
	act := ""
	if obs.Action != s.ActedOn && len(obs.Action) <= MaxAction {
		// (A longer value acts on nothing: the status keeps the value acted on whole, to compare it.)
		act = actionOf(obs.Action)
	}
	switch {
	case s.Stable == "":
		// The first version, or a WebApp that just took the strategy: what the stable Deployment runs is stable
		// (nothing runs yet: the spec's version is), and a spec asking for another is its canary.
		s.Stable = obs.Revision
		if obs.Deployed != "" {
			s.Stable = obs.Deployed
		}
		if s.Stable != obs.Revision {
			return startCanary(plan, s, obs)
		}
		return Decision{State: s, Phase: PhaseStable}
	case obs.Revision == s.Stable:
		// The spec is back at the stable version (a canary abandoned by the user, or none): nothing to try. A
		// failed revision stays known, so applying it again still does not loop.
		return Decision{State: s, Phase: PhaseStable}
	case s.Canary == "" && !left && s.Previous != "" && obs.Revision == s.Previous && plan.RollbackWindow > 0 && now.Before(s.PreviousUntil):
		// The spec set back to the version the last promotion replaced, within the window (a reverted commit): it
		// is stable again at once, and the stable Deployment rolls back to it without a canary's steps or checks.
		// (Not while another version's canary ran: the stable one is not what the spec was set back from.)
		if plan.KeepWarm && !plan.Shared && obs.WarmReady {
			// Its pods kept warm are ready: they get all the traffic at once, through the route, and the stable
			// Deployment rolls back to it behind the route, as a promotion's does (promote, under this reason).
			s.Reason, s.Message = webappv2.ReasonRolledBackToPrevious, fmt.Sprintf("the spec was set back to revision %s, the version before revision %s, within the rollback window: all the traffic went to its pods kept warm at once, and the Deployment rolls back to it", s.Previous, s.Stable)
			// (With autoscaling, the stable count now is held by the HPA's floor until it is over: the stable pods serve
			// nothing meanwhile, and the HPA, which measures them, would shrink them, and the kept pods' count with
			// them.)
			s.Canary, s.Step, s.Since, s.GateSince, s.Failures, s.Evaluations, s.Held = s.Previous, len(plan.Steps), time.Time{}, time.Time{}, nil, nil, obs.StableReplicas
			s.Previous, s.PreviousUntil = "", time.Time{}
			return promote(plan, s, Observation{}, now)
		}
		s.Reason, s.Message = webappv2.ReasonRolledBackToPrevious, fmt.Sprintf("the spec was set back to revision %s, the version before revision %s, within the rollback window: rolled back to it at once, without a canary", s.Previous, s.Stable)
		s.Stable, s.Previous, s.PreviousUntil, s.Step, s.Since, s.Failures, s.Evaluations = s.Previous, "", time.Time{}, 0, time.Time{}, nil, nil
		return Decision{State: s, Phase: PhaseStable}
	case obs.Revision == s.Failed && act == Retry(s.Failed) && obs.Deployed != "":
		// A person retries the version rolled back: its canary starts again, from the first step.
		s.Failed, s.ActedOn = "", obs.Action
		return startCanary(plan, s, obs)
	case obs.Revision == s.Failed:
		// The version rolled back (applied again, or still): it stays rolled back, rather than loop. Its pods stay
		// Retire after the traffic left them, counted from since.
		if !s.Since.IsZero() {
			if keep, left := stay(s.Since, plan.RetireAfter(), obs, now); keep {
				return Decision{State: s, Phase: PhaseRolledBack, ReplicaWeight: plan.Steps[min(s.Step, len(plan.Steps)-1)].Pods(), After: left, HeldUnderTraffic: left == 0}
			}
			s.Step, s.Since = 0, time.Time{}
		}
		return Decision{State: s, Phase: PhaseRolledBack}
	case s.Canary == "" && !left && obs.Deployed == "":
		// A new version while no stable Deployment runs and no canary is under way (the Deployment API refused
		// the stable version, or it is not created yet): there is no traffic to protect, and a canary beside a
		// version that cannot run would hold the new one back for ever. The spec's version is stable, as the first
		// one is.
		// (The version before is not one a promotion replaced: no rollback window for it.)
		s.Stable, s.Step, s.Since, s.Failures, s.Evaluations = obs.Revision, 0, time.Time{}, nil, nil
		s.Previous, s.PreviousUntil = "", time.Time{}
		return Decision{State: s, Phase: PhaseStable}
	case obs.Revision != s.Canary:
		// A new version (or one changed mid-canary, or while another was promoted: abandon): its canary starts
		// from the first step.
		return startCanary(plan, s, obs)
	}
	if s.WayBack() && act == Abort(s.Canary) {
		// An abort of the way back: it is the version the spec asks for, with nothing to go back to. The value is
		// spent, so it never aborts a later canary of the same version.
		s.ActedOn = obs.Action
	} else if s.Step >= len(plan.Steps) && act == Abort(s.Canary) && obs.StableKept {
		// A person aborts a canary being promoted: the stable Deployment rolls back to the version it ran, kept
		// until the promotion completes, and the traffic is the stable Service's alone at once.
		s.ActedOn = obs.Action
		return rollBack(plan, s, webappv2.ReasonAborted, "aborted by a person while being promoted ("+webappv2.AnnotationAction+": "+obs.Action+")", now)
	}
	if s.Step >= len(plan.Steps) {
		d := promote(plan, s, obs, now)
		if obs.GatewayLacks != "" {
			// A promotion is not rolled back: the route keeps the last step's traffic without what the Gateway lacks.
			d.Mirror = 0
		}
		return d
	}
	if act == Abort(s.Canary) {
		// A person aborts the canary: traffic goes back to stable at once.
		s.ActedOn = obs.Action
		return rollBack(plan, s, webappv2.ReasonAborted, "aborted by a person ("+webappv2.AnnotationAction+": "+obs.Action+")", now)
	}
	if obs.TroubleReason != "" {
		// The canary's pods cannot run: traffic goes back to stable at once.
		return rollBack(plan, s, obs.TroubleReason, obs.TroubleMessage, now)
	}
	if obs.GatewayLacks != "" {
		// The Gateway may not do what the plan asks of the route (a gateway that lacks a filter answers the rule's
		// requests with errors): back before the route asks it.
		return rollBack(plan, s, webappv2.ReasonGatewayUnsupported, obs.GatewayLacks, now)
	}
	if act == PromoteFull(s.Canary) {
		// A person promotes it all the way: from now on each step passes once its pods are ready at its weight
		// and the gateway has learnt them (never traffic to pods not ready for it), its pause, checks and gate
		// waived. The action acted on says so for the rest of this canary.
		s.ActedOn = obs.Action
	}
	full := actionOf(s.ActedOn) == PromoteFull(s.Canary)
	if obs.Checks != nil && (s.Since.IsZero() || obs.ChecksAt.Before(s.Since)) {
		// A round begun before this step's pods were ready at its weight (one of an attempt aborted before a
		// retry, say) measured something else: dropped.
		obs.Checks = nil
	}
	for i, c := range plan.Checks {
		if i < len(obs.Checks) && c.At(s.Step) && obs.Checks[i].Skipped {
			// A round begun under another plan (a check's during changed meanwhile) did not query a check this
			// step counts: dropped, never taken for a pass.
			obs.Checks = nil
		}
	}
	if obs.Checks != nil {
		// A round ended: its results are the checks' last evaluations, whatever follows from them.
		s.Evaluations = evaluations(plan, s.Step, obs.Checks, obs.ChecksAt, s.Evaluations)
	}
	failing := ""
	for i, c := range plan.Checks {
		if i >= len(obs.Checks) {
			break
		}
		if !c.At(s.Step) {
			// Not this step's (a blue/green's check of its other part): neither queried nor counted.
			continue
		}
		if waiting(c, evaluationOf(s.Evaluations, c.Name)) {
			// No value yet, within the bound the check allows: the step holds, and no failure is counted.
			failing = c.Name
			continue
		}
		if ok, said := passes(c, obs.Checks[i]); !ok {
			s.Failures = countFailure(s.Failures, len(plan.Checks), i)
			if s.Failures[i] > c.FailuresAllowed {
				return rollBack(plan, s, webappv2.ReasonCheckFailed, fmt.Sprintf("check %s: %s (failures %d, allowed %d)", c.Name, said, s.Failures[i], c.FailuresAllowed), now)
			}
			failing = c.Name
		}
	}
	step := plan.Steps[s.Step]
	d := Decision{State: s, Phase: PhaseCanary, ReplicaWeight: step.Pods()}
	d.routeAs(plan, s.Step)
	if !obs.CanaryReady {
		// The pause starts once the canary serves its weight; until then, its pods' events bring us back, and the
		// traffic stays the step before's.
		d.routeAs(plan, s.Step-1)
		return d
	}
	if s.Since.IsZero() {
		d.State.Since = now
	}
	if warm := d.State.Since.Add(plan.Warmup()).Sub(now); warm > 0 {
		// Ready just now: the gateway learns the new pods' endpoints first, then gets the route's new weight.
		d.routeAs(plan, s.Step-1)
		d.After = warm
		return d
	}
	if act == PromoteStep(s.Canary, s.Step) {
		// A person promotes this step, its pods ready and warmed up at its weight: it passes now, its pause, checks
		// and gate with it. (Before that, the action waits: it acts once it makes sense.)
		d.State.ActedOn = obs.Action
		return nextStep(plan, d, obs, now)
	}
	if full {
		return nextStep(plan, d, obs, now)
	}
	if left := d.State.Since.Add(step.Pause).Sub(now); left > 0 {
		d.After = min(left, nextCheck(plan, s.Step))
		return d
	}
	if plan.ChecksAt(s.Step) && (len(obs.Checks) < len(plan.Checks) || failing != "" || obs.ChecksAt.Before(d.State.Since.Add(step.Pause))) {
		// The pause is over, but the step passes only on every check's passing result, taken after it.
		d.After = nextCheck(plan, s.Step)
		return d
	}
	if step.Gate {
		// The step waits for a person, since the first look that found it ready to pass.
		if d.State.GateSince.IsZero() {
			d.State.GateSince = now
		}
		if step.GateTimeout == 0 {
			// Until a person acts (their annotation is an event); the checks go on meanwhile.
			if plan.ChecksAt(s.Step) {
				d.After = nextCheck(plan, s.Step)
			}
			return d
		}
		if left := d.State.GateSince.Add(step.GateTimeout).Sub(now); left > 0 {
			d.After = left
			if plan.ChecksAt(s.Step) {
				d.After = min(left, nextCheck(plan, s.Step))
			}
			return d
		}
		if step.OnTimeout != webappv2.GatePromote {
			return rollBack(plan, d.State, webappv2.ReasonGateTimedOut, fmt.Sprintf("no one promoted step %d within its gate's %s", s.Step, step.GateTimeout), now)
		}
	}
	return nextStep(plan, d, obs, now)
}

// nextStep passes d's step: the next one starts (its weight once its pods are ready), or promotion after the last.
func nextStep(plan Plan, d Decision, obs Observation, now time.Time) Decision {
	d.State.Step++
	d.State.Since, d.State.GateSince = time.Time{}, time.Time{}
	if d.State.Step >= len(plan.Steps) {
		return promote(plan, d.State, obs, now)
	}
	if plan.BlueGreen && plan.Steps[d.State.Step].Weight >= 100 && d.State.Held == 0 {
		// A blue/green's switch: the stable count now is held (by an HPA's floor) until the release ends.
		d.State.Held = obs.StableReplicas
	}
	// The next step's pods are not there yet: the traffic stays until they are ready.
	d.ReplicaWeight = plan.Steps[d.State.Step].Pods()
	d.After = 0
	if obs.CanaryReady && (d.ReplicaWeight == plan.Steps[d.State.Step-1].Pods() || obs.NextStepReady) {
		// They are: the step before's, ready (a blue/green's switch, or a share that needs no other count). Its
		// pause starts now, the traffic after the warm-up; no event of the pods' would bring the canary back.
		d.State.Since, d.After = now, plan.Warmup()
		if d.After == 0 {
			// No warm-up (the Service switches): the traffic now, and a look again at the pause's end or the next
			// round of checks, a second from now at the soonest.
			d.routeAs(plan, d.State.Step)
			d.After = max(min(plan.Steps[d.State.Step].Pause, nextCheck(plan, d.State.Step)), time.Second)
			if actionOf(d.State.ActedOn) == PromoteFull(d.State.Canary) {
				// Promoted all the way: the step passes at the next look.
				d.After = time.Second
			}
		}
	}
	return d
}

// routeAs sends the canary the traffic of step i: its weight, matches and mirror (none before the first).
func (d *Decision) routeAs(plan Plan, i int) {
	d.Traffic = Traffic{}
	if i >= 0 && i < len(plan.Steps) {
		s := plan.Steps[i]
		d.Traffic = Traffic{Weight: s.Weight, Matches: s.Matches, Mirror: s.Mirror}
	}
}

// startCanary starts a canary of obs.revision at the first step.
// What this reconcile saw of a canary belongs to the version before, so nothing else follows from it yet.
func startCanary(plan Plan, s State, obs Observation) Decision {
	s.Canary, s.Step, s.Since, s.GateSince, s.Failures, s.Reason, s.Message, s.Evaluations, s.Held = obs.Revision, 0, time.Time{}, time.Time{}, nil, "", "", nil, 0
	if len(plan.Steps) == 0 {
		return promote(plan, s, Observation{}, time.Time{})
	}
	return Decision{State: s, Phase: PhaseCanary, ReplicaWeight: plan.Steps[0].Pods()}
}

// Warmup is how long after a canary's pods are ready at a step's count its weight reaches the route: the
// time a gateway takes to learn new endpoints (Traefik applies a provider's changes every 2 s), so no request is
// sent to a backend the gateway still knows no server of. The step's pause includes it.
const Warmup = 5 * time.Second

// Retire is how long a promoted canary's pods stay after the traffic left them: the gateway follows the
// route's new weights within moments, and requests on their way to the canary are still answered.
const Retire = 10 * time.Second

// promote rolls the stable Deployment to the canary's version; the canary keeps the last step's weight until the
// stable one has rolled out. Then the traffic leaves the canary, its pods stay Retire longer (counted from
// since), and stable is the new version.
func promote(plan Plan, s State, obs Observation, now time.Time) Decision {
	var w int32
	if n := len(plan.Steps); n > 0 {
		w = plan.Steps[n-1].Pods()
	}
	back := s.WayBack()
	if back {
		// The way back to the version kept warm: all of the traffic, on all of its pods, until the stable Deployment
		// runs it again.
		w = 100
	}
	if s.Step < len(plan.Steps) {
		// Just promoted: the stable Deployment rolls from now on.
		s.Step, s.Since, s.GateSince = len(plan.Steps), time.Time{}, time.Time{}
		obs.StableRolledOut = false
	}
	if !obs.StableRolledOut && s.Since.IsZero() {
		// The last step's traffic, until the stable Deployment serves the same version. (Once it has left the canary,
		// it never comes back to it: a stable pod not ready a moment later does not send the traffic to pods about to
		// go.)
		d := Decision{State: s, Phase: PhasePromoting, ReplicaWeight: w}
		d.routeAs(plan, len(plan.Steps)-1)
		if back {
			d.Traffic = Traffic{Weight: 100}
		}
		return d
	}
	if s.Since.IsZero() {
		s.Since = now
	}
	if keep, left := stay(s.Since, plan.RetireAfter(), obs, now); keep {
		return Decision{State: s, Phase: PhasePromoting, ReplicaWeight: w, After: left, HeldUnderTraffic: left == 0}
	}
	// The version replaced stays known for the rollback window: set back to, it is rolled back to at once. (Not
	// after a way back: what it left was the version the spec was set back from.)
	s.Previous, s.PreviousUntil = "", time.Time{}
	if plan.RollbackWindow > 0 && !back {
		s.Previous, s.PreviousUntil = s.Stable, now.Add(plan.RollbackWindow).Truncate(time.Second)
	}
	s.Stable, s.Canary, s.Failed, s.Step, s.Since, s.Failures, s.Evaluations, s.Held = s.Canary, "", "", 0, time.Time{}, nil, nil, 0
	return Decision{State: s, Phase: PhaseStable}
}

// rollBack stops the canary, saying why: the stable version serves everything from now, and the canary's pods go
// Retire later (the gateway follows the route first); step stays the one it failed at.
func rollBack(plan Plan, s State, reason, message string, now time.Time) Decision {
	if s.Step > 0 && s.Step < len(plan.Steps) && s.Since.IsZero() {
		// Its pods not yet ready at this step's count (a blue/green's, before the switch): the traffic never left the
		// step before, which it is rolled back from; its pods keep that step's count while they retire (never scaled
		// up for a step that will not come).
		s.Step--
	}
	s.Failed, s.Canary, s.Since, s.GateSince, s.Failures, s.Held = s.Canary, "", now, time.Time{}, nil, 0
	s.Reason, s.Message = reason, message
	if s.Retiring != "" {
		// Its pods never came: those of the version before it still retire in the canary's Deployment.
		s.Step, s.Since = 0, time.Time{}
		return Decision{State: s, Phase: PhaseRolledBack}
	}
	if plan.Shared {
		// No route splits the traffic: its pods are behind the one Service, and kept they would go on serving their
		// share; deleted, they leave it as any pod going does. (Step stays the one it failed at.)
		s.Since = time.Time{}
		return Decision{State: s, Phase: PhaseRolledBack}
	}
	return Decision{State: s, Phase: PhaseRolledBack, ReplicaWeight: plan.Steps[min(s.Step, len(plan.Steps)-1)].Pods(), After: plan.RetireAfter()}
}

// passes reports whether a check's result passes, and what it said. No value passes only under NoDataPass (and
// says so); under NoDataWait it fails once the wait is over (waiting says whether it is).
func passes(c Check, r CheckResult) (bool, string) {
	switch {
	case r.Err != nil:
		return false, r.Err.Error()
	case math.IsNaN(r.Value) && c.NoData == webappv2.NoDataPass:
		return true, "no value, passed (onNoData: Pass)"
	case math.IsNaN(r.Value) && c.NoData == webappv2.NoDataWait:
		return false, fmt.Sprintf("no value for %s (onNoData: Wait)", c.NoDataWait)
	case math.IsNaN(r.Value):
		return false, "no value"
	case math.IsInf(r.Value, 0):
		// -Inf is below every max, yet measures nothing: only a finite number passes.
		return false, FormatValue(r.Value) + " is not a finite number"
	case r.Value > c.Max:
		return false, fmt.Sprintf("%s > %s", FormatValue(r.Value), FormatValue(c.Max))
	}
	return true, ""
}

// evaluations are the record of a round's results at step, taken at at, in the plan's order; prev, the record
// before, carries how long a check waiting for data has had none, and the last evaluation of a check that does not
// gate this step (a blue/green's check of its other part), which the round did not query.
func evaluations(plan Plan, step int, results []CheckResult, at time.Time, prev []Evaluation) []Evaluation {
	at = at.Truncate(time.Second)
	var out []Evaluation
	for i, c := range plan.Checks {
		if i >= len(results) {
			break
		}
		if !c.At(step) {
			if e := evaluationOf(prev, c.Name); e.Name != "" {
				out = append(out, e)
			}
			continue
		}
		r := results[i]
		ok, said := passes(c, r)
		e := Evaluation{Name: c.Name, Max: FormatValue(c.Max), Passed: ok, Address: c.Address, Query: c.Query, At: at}
		noValue := r.Err == nil && math.IsNaN(r.Value)
		if r.Err == nil && !noValue {
			e.Value = FormatValue(r.Value)
		}
		if noValue && c.NoData == webappv2.NoDataWait {
			e.NoDataSince = at
			if p := evaluationOf(prev, c.Name); !p.NoDataSince.IsZero() {
				e.NoDataSince = p.NoDataSince
			}
			if waiting(c, e) {
				said = fmt.Sprintf("no value since %s, waiting up to %s (onNoData: Wait)", e.NoDataSince.UTC().Format(time.RFC3339), c.NoDataWait)
			}
		}
		if r.Err != nil || noValue || math.IsInf(r.Value, 0) {
			// Above max is said by the value and max; anything else by its words.
			e.Error = said
		}
		out = append(out, e)
	}
	return out
}

// waiting: check c, which waits for data, has had none in e for less than its bound.
func waiting(c Check, e Evaluation) bool {
	return c.NoData == webappv2.NoDataWait && !e.NoDataSince.IsZero() && e.At.Sub(e.NoDataSince) < c.NoDataWait
}

// FormatValue writes a check's value as the status and the messages show it: four significant digits.
func FormatValue(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

// countFailure adds a failure of check i to failures, sized to n checks.
func countFailure(failures []int32, n, i int) []int32 {
	out := make([]int32, n)
	copy(out, failures)
	out[i]++
	return out
}

// nextCheck is the shortest interval of the checks that gate step i (a pause without them waits for its end alone).
func nextCheck(plan Plan, i int) time.Duration {
	d := time.Duration(math.MaxInt64)
	for _, c := range plan.Checks {
		if c.At(i) {
			d = min(d, c.Interval)
		}
	}
	return d
}

// evaluationOf is the evaluation of the check named name in evs (none: the zero one).
func evaluationOf(evs []Evaluation, name string) Evaluation {
	for _, e := range evs {
		if e.Name == name {
			return e
		}
	}
	return Evaluation{}
}
