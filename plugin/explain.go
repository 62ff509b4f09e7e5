package plugin

import (
	"fmt"
	"io"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/canary"
	"github.com/example/webapp-operator/controller/desired"
	"github.com/example/webapp-operator/controller/pods"
	"github.com/example/webapp-operator/controller/status"
)

// Statement is one answer of explain: what is so, and the evidence for it.
type Statement struct {
	Says     string     `json:"says"`
	Evidence []Evidence `json:"evidence,omitempty"`
}

// Evidence is one value read: the object, the field and what it holds.
type Evidence struct {
	Object string `json:"object"`
	Field  string `json:"field"`
	Value  string `json:"value"`
}

// Explain says why the WebApp of s is where it is: each condition with the values behind it, who sets the count
// and why, where the traffic goes and why (the canary's step, its pause, its checks), and the fields other managers
// keep. now is the clock a pause is measured by.
func Explain(s Snapshot, now time.Time) []Statement {
	app := s.App
	var out []Statement
	dep := s.child("Deployment", app.Name)
	for _, c := range app.Status.Conditions {
		st := Statement{Says: fmt.Sprintf("%s is %s (%s): %s", c.Type, c.Status, c.Reason, c.Message),
			Evidence: []Evidence{{"WebApp " + app.Name, fmt.Sprintf(".status.conditions[type=%q]", c.Type), fmt.Sprintf("%s since %s, of generation %d", c.Status, c.LastTransitionTime.UTC().Format(time.RFC3339), c.ObservedGeneration)}}}
		if c.ObservedGeneration != app.Generation {
			st.Evidence = append(st.Evidence, Evidence{"WebApp " + app.Name, ".metadata.generation", fmt.Sprintf("%d: the operator has not reported on this spec yet", app.Generation)})
		}
		switch c.Type {
		case webappv2.ConditionReady, webappv2.ConditionProgressing:
			st.Evidence = append(st.Evidence, deploymentEvidence(dep)...)
			if d, ok := dep.(*appsv1.Deployment); ok {
				st.Evidence = append(st.Evidence, podEvidence(s.Pods[d.Name])...)
			}
		case webappv2.ConditionExposed:
			st.Evidence = append(st.Evidence, exposeEvidence(s)...)
		}
		out = append(out, st)
	}
	if st, ok := countStatement(s); ok {
		out = append(out, st)
	}
	if st, ok := trafficStatement(s, now); ok {
		out = append(out, st)
	}
	for _, f := range app.Status.RetainedFields {
		out = append(out, Statement{Says: fmt.Sprintf("%s %s is kept by %s, not by the operator: the operator's apply left it out, and its value is theirs", f.Kind, f.Field, strings.Join(f.Managers, ", ")),
			Evidence: []Evidence{{"WebApp " + app.Name, ".status.retainedFields", f.Kind + " " + f.Field}, {f.Kind + " " + app.Name, ".metadata.managedFields", "held by " + strings.Join(f.Managers, ", ")}}})
	}
	return out
}

// child is s's child of kind and name (nil: not there).
func (s Snapshot) child(kind, name string) any {
	for _, c := range s.Children {
		if kindOf(c) == kind && c.GetName() == name {
			return c
		}
	}
	return nil
}

func deploymentEvidence(obj any) []Evidence {
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return []Evidence{{"Deployment", "", "not there (or not the WebApp's)"}}
	}
	name := "Deployment " + d.Name
	var want int32 = 1
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	ev := []Evidence{
		{name, ".spec.replicas", fmt.Sprint(want)},
		{name, ".status.updatedReplicas / readyReplicas / availableReplicas", fmt.Sprintf("%d / %d / %d", d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas)},
	}
	if d.Status.ObservedGeneration < d.Generation {
		ev = append(ev, Evidence{name, ".status.observedGeneration", fmt.Sprintf("%d of generation %d: its controller has not seen the latest spec", d.Status.ObservedGeneration, d.Generation)})
	}
	for _, c := range d.Status.Conditions {
		if c.Status != corev1.ConditionTrue || c.Reason == webappv2.ReasonProgressDeadlineExceeded {
			ev = append(ev, Evidence{name, fmt.Sprintf(".status.conditions[type=%q]", c.Type), fmt.Sprintf("%s (%s): %s", c.Status, c.Reason, c.Message)})
		}
	}
	return ev
}

// podEvidence names each pod in trouble, in the operator's own words for it (pods.OneTrouble).
func podEvidence(podList []*corev1.Pod) []Evidence {
	var ev []Evidence
	for _, p := range podList {
		reason, detail := pods.OneTrouble(pods.AsCached(p))
		if reason == "" {
			continue
		}
		field := ".status.containerStatuses"
		if reason == webappv2.ReasonUnschedulable {
			field = `.status.conditions[type="PodScheduled"]`
		}
		ev = append(ev, Evidence{"Pod " + p.Name, field, reason + ": " + detail})
	}
	return ev
}

func exposeEvidence(s Snapshot) []Evidence {
	var ev []Evidence
	for _, c := range s.Children {
		switch o := c.(type) {
		case *gwv1.HTTPRoute:
			for _, p := range o.Status.Parents {
				for _, cond := range p.Conditions {
					ev = append(ev, Evidence{"HTTPRoute " + o.Name, fmt.Sprintf(".status.parents[name=%q].conditions[type=%q]", p.ParentRef.Name, cond.Type), fmt.Sprintf("%s (%s): %s", cond.Status, cond.Reason, cond.Message)})
				}
			}
			if len(o.Status.Parents) == 0 {
				ev = append(ev, Evidence{"HTTPRoute " + o.Name, ".status.parents", "none: no Gateway controller has taken the route up yet"})
			}
		default:
			if kindOf(c) == "Ingress" {
				ev = append(ev, Evidence{"Ingress " + c.GetName(), ".status.loadBalancer.ingress", childState(c)})
			}
		}
	}
	return ev
}

// countStatement says who sets the replica count, and why it is what it is.
func countStatement(s Snapshot) (Statement, bool) {
	app := s.App
	if app.Status.ReplicasSetBy == "" {
		return Statement{}, false
	}
	st := Statement{Says: fmt.Sprintf("The count is %d, set by %s", app.Status.DesiredReplicas, app.Status.ReplicasSetBy),
		Evidence: []Evidence{{"WebApp " + app.Name, ".status.replicasSetBy", app.Status.ReplicasSetBy}}}
	if app.Status.ReplicasSetBy != webappv2.ReplicasSetByHPA {
		if app.Spec.Replicas != nil {
			st.Evidence = append(st.Evidence, Evidence{"WebApp " + app.Name, ".spec.replicas", fmt.Sprint(*app.Spec.Replicas)})
		}
		return st, true
	}
	h, ok := s.child("HorizontalPodAutoscaler", app.Name).(*autoscalingv2.HorizontalPodAutoscaler)
	if !ok {
		return st, true
	}
	name := "HorizontalPodAutoscaler " + h.Name
	st.Says += hpaReason(h)
	st.Evidence = append(st.Evidence, Evidence{name, ".spec.minReplicas / maxReplicas", fmt.Sprintf("%d / %d", hpaFloor(h), h.Spec.MaxReplicas)})
	st.Evidence = append(st.Evidence, Evidence{name, ".status.currentReplicas / desiredReplicas", fmt.Sprintf("%d / %d", h.Status.CurrentReplicas, h.Status.DesiredReplicas)})
	for i, m := range h.Status.CurrentMetrics {
		if m.Resource != nil && m.Resource.Current.AverageUtilization != nil {
			target := ""
			for _, sm := range h.Spec.Metrics {
				if sm.Resource != nil && sm.Resource.Name == m.Resource.Name && sm.Resource.Target.AverageUtilization != nil {
					target = fmt.Sprintf(" against a target of %d%%", *sm.Resource.Target.AverageUtilization)
				}
			}
			st.Evidence = append(st.Evidence, Evidence{name, fmt.Sprintf(".status.currentMetrics[%d]", i), fmt.Sprintf("%s at %d%%%s", m.Resource.Name, *m.Resource.Current.AverageUtilization, target)})
		}
	}
	for _, c := range h.Status.Conditions {
		st.Evidence = append(st.Evidence, Evidence{name, fmt.Sprintf(".status.conditions[type=%q]", c.Type), fmt.Sprintf("%s (%s): %s", c.Status, c.Reason, c.Message)})
	}
	return st, true
}

// hpaFloor is h's minReplicas (1 unset).
func hpaFloor(h *autoscalingv2.HorizontalPodAutoscaler) int32 {
	if h.Spec.MinReplicas != nil {
		return *h.Spec.MinReplicas
	}
	return 1
}

// hpaReason is why h's count is what it is, in a few words: at a bound, or held because it cannot compute one.
func hpaReason(h *autoscalingv2.HorizontalPodAutoscaler) string {
	var why []string
	switch n := h.Status.CurrentReplicas; {
	case n == hpaFloor(h):
		why = append(why, "its floor (minReplicas)")
	case n == h.Spec.MaxReplicas:
		why = append(why, "its ceiling (maxReplicas)")
	}
	for _, c := range h.Status.Conditions {
		if c.Type == autoscalingv2.ScalingActive && c.Status == corev1.ConditionFalse {
			why = append(why, "it cannot compute a count from its metrics ("+c.Reason+"), so it only keeps the count within its bounds")
		}
	}
	if len(why) == 0 {
		return ""
	}
	return ": " + strings.Join(why, "; ")
}

// trafficStatement says where the traffic goes and why: the route's weights, the canary's step and pause, its
// failed checks, or the rollback and its cause.
func trafficStatement(s Snapshot, now time.Time) (Statement, bool) {
	app := s.App
	c, spec := app.Status.Canary, app.Spec.Rollout.Canary
	if c == nil || spec == nil && c.RetiringRevision == "" {
		return Statement{}, false
	}
	st := Statement{}
	canaryName := app.Name + "-canary"
	if spec == nil {
		// The strategy taken out while the route sent its canary traffic: its pods retire, then status.canary goes.
		st.Says = fmt.Sprintf("All the traffic goes to %s: spec.rollout.canary was taken out, and the pods of the canary it ran retire", app.Name)
		st.Evidence = append(st.Evidence, retiringEvidence(app, c, canaryName))
		return st, true
	}
	switch c.Phase {
	case "Canary":
		st.Says = fmt.Sprintf("%d%% of the traffic goes to revision %s (%s), the rest to revision %s (%s): the canary is at step %d of %d", c.Weight, c.CanaryRevision, canaryName, c.StableRevision, app.Name, c.Step+1, len(spec.EffectiveSteps()))
		switch {
		case spec.BlueGreen != nil && c.Weight == 100:
			st.Says = fmt.Sprintf("all the traffic goes to revision %s (%s) since the blue/green switch (%s); revision %s (%s) is kept at full size to switch back to (kubectl webapp abort %s)", c.CanaryRevision, canaryName, switchWords(app), c.StableRevision, app.Name, app.Name)
		case spec.BlueGreen != nil:
			st.Says = fmt.Sprintf("revision %s (%s) is previewed %s with none of the traffic, which revision %s (%s) serves: the blue/green switch comes after the preview", c.CanaryRevision, canaryName, desired.SizeWords(spec.BlueGreen.PreviewSize()), c.StableRevision, app.Name)
			if c.Step == 1 {
				// (Past the preview: the new version at full size is switched to once every pod is ready and, behind a
				// route, the gateway has learnt them.)
				st.Says = fmt.Sprintf("revision %s (%s) runs at full size for the blue/green switch, which comes once every one of its pods is ready (behind a route, %.0fs later); revision %s (%s) serves all the traffic until then", c.CanaryRevision, canaryName, canary.Warmup.Seconds(), c.StableRevision, app.Name)
			}
			st.Evidence = append(st.Evidence, previewEvidence(app, canaryName))
		}
		st.Evidence = append(st.Evidence, Evidence{"WebApp " + app.Name, ".status.canary.step / weight", fmt.Sprintf("%d / %d", c.Step, c.Weight)})
		if int(c.Step) < len(spec.EffectiveSteps()) {
			step := spec.EffectiveSteps()[c.Step]
			field, words := fmt.Sprintf(".spec.rollout.canary.steps[%d]", c.Step), fmt.Sprintf("weight %d, pause %ds", step.Weight, step.PauseSeconds)
			switch {
			case spec.BlueGreen != nil && c.Step == 0:
				field, words = ".spec.rollout.canary.blueGreen.previewSeconds", fmt.Sprintf("%d: the preview, %s with no traffic", step.PauseSeconds, desired.SizeWords(spec.BlueGreen.PreviewSize()))
			case spec.BlueGreen != nil:
				field, words = ".spec.rollout.canary.blueGreen.keepSeconds", fmt.Sprintf("%d: the version before kept after the switch (and the %.0f s warm-up)", step.PauseSeconds, canary.Warmup.Seconds())
				if desired.CanarySwitched(app) {
					// (The Service's switch needs no warm-up.)
					words = fmt.Sprintf("%d: the version before kept after the switch", step.PauseSeconds)
				}
			}
			st.Evidence = append(st.Evidence, Evidence{"WebApp " + app.Name, field, words})
			if c.StepStartedAt != nil {
				pause := time.Duration(step.PauseSeconds) * time.Second
				if spec.BlueGreen != nil && c.Step == 1 && !desired.CanarySwitched(app) {
					// The keep is counted from the switch, a warm-up after the step's start (the Service's at once).
					pause += canary.Warmup
				}
				left := c.StepStartedAt.Add(pause).Sub(now).Round(time.Second)
				words := "its pause is over: it moves on once its checks pass"
				if left > 0 {
					words = fmt.Sprintf("its pause ends in %s", left)
				}
				st.Evidence = append(st.Evidence, Evidence{"WebApp " + app.Name, ".status.canary.stepStartedAt", c.StepStartedAt.UTC().Format(time.RFC3339) + ": " + words})
			} else {
				st.Evidence = append(st.Evidence, Evidence{"WebApp " + app.Name, ".status.canary.stepStartedAt", "not set: the canary is not ready at its step's weight yet"})
			}
			if c.GateSince != nil && step.Gate != nil {
				// The answer first: who is waited for, since when, and what ends the wait.
				st.Says += fmt.Sprintf("; its gate waits for a person since %s", c.GateSince.UTC().Format(time.RFC3339))
				words := "until a person promotes it (kubectl webapp promote " + app.Name + ") or aborts it (kubectl webapp abort " + app.Name + ")"
				if step.Gate.TimeoutSeconds > 0 {
					onTimeout := step.Gate.OnTimeout
					if onTimeout == "" {
						onTimeout = webappv2.GateRollBack
					}
					left := c.GateSince.Add(time.Duration(step.Gate.TimeoutSeconds) * time.Second).Sub(now).Round(time.Second)
					words += fmt.Sprintf(", or its timeout in %s, which does %s", max(left, 0), onTimeout)
				}
				st.Evidence = append(st.Evidence, Evidence{"WebApp " + app.Name, ".status.canary.gateSince", c.GateSince.UTC().Format(time.RFC3339) + ": it waits " + words})
			}
		}
	case "Promoting":
		st.Says = fmt.Sprintf("Revision %s passed every step: the stable Deployment %s rolls to it", c.CanaryRevision, app.Name)
		if c.Reason == webappv2.ReasonRolledBackToPrevious {
			// The way back to the version kept warm.
			st.Says = fmt.Sprintf("All the traffic goes to revision %s (%s), the version before the last promotion, whose pods were kept warm: the stable Deployment %s rolls back to it", c.CanaryRevision, canaryName, app.Name)
			st.Evidence = append(st.Evidence, Evidence{"WebApp " + app.Name, ".status.canary.reason / message", c.Reason + ": " + c.Message})
		}
	case "RolledBack":
		st.Says = fmt.Sprintf("All the traffic goes to revision %s (%s): revision %s was rolled back (%s)", c.StableRevision, app.Name, c.FailedRevision, c.Reason)
		st.Evidence = append(st.Evidence, Evidence{"WebApp " + app.Name, ".status.canary.reason / message", c.Reason + ": " + c.Message},
			Evidence{"WebApp " + app.Name, ".status.canary.failedRevision", c.FailedRevision + ": applying it again does not start it again; another revision does"})
	default:
		st.Says = fmt.Sprintf("All the traffic goes to revision %s (%s): no canary runs", c.StableRevision, app.Name)
		if c.Reason == webappv2.ReasonRolledBackToPrevious {
			st.Evidence = append(st.Evidence, Evidence{"WebApp " + app.Name, ".status.canary.reason / message", c.Reason + ": " + c.Message})
		}
	}
	if c.RetiringRevision != "" {
		// Pods of a version the spec left, still there: said, with when they go.
		st.Evidence = append(st.Evidence, retiringEvidence(app, c, canaryName))
	}
	if c.HeldReplicas > 0 {
		st.Evidence = append(st.Evidence, Evidence{"WebApp " + app.Name, ".status.canary.heldReplicas", fmt.Sprintf(
			"%d: the HorizontalPodAutoscaler's floor (minReplicas) holds %s at %d pods, its count at the blue/green switch, until the release ends (the stable pods serve nothing meanwhile, and the HPA would shrink both versions)",
			c.HeldReplicas, app.Name, c.HeldReplicas)})
	}
	if c.PreviousRevision != "" && c.PreviousUntil != nil {
		words := fmt.Sprintf("its rollback window ended at %s: setting the spec back to it starts a canary", c.PreviousUntil.UTC().Format(time.RFC3339))
		warm := warmIn(s, canaryName, c.PreviousRevision)
		switch left := c.PreviousUntil.Sub(now).Round(time.Second); {
		case left > 0 && c.Phase == "Stable" && spec.KeepPreviousWarm && warm == warmReady:
			words = fmt.Sprintf("the version before the last promotion, its pods kept warm in %s with none of the traffic: setting the spec back to it within %s (until %s) sends them all the traffic at once, and the Deployment rolls back to it behind %s", canaryName, left, c.PreviousUntil.UTC().Format(time.RFC3339), trafficBy(app))
		case left > 0 && c.Phase == "Stable" && spec.KeepPreviousWarm && warm == warmStarting:
			words = fmt.Sprintf("the version before the last promotion, to be kept warm in %s until %s, not every pod of it ready: setting the spec back to it within %s rolls back to it at once, through its pods once every one is ready (before that, by the Deployment's rollout)", canaryName, c.PreviousUntil.UTC().Format(time.RFC3339), left)
		case left > 0 && (c.Phase == "Stable" || c.Phase == "RolledBack"):
			words = fmt.Sprintf("the version before the last promotion: setting the spec back to it within %s (until %s) rolls back to it at once, without a canary", left, c.PreviousUntil.UTC().Format(time.RFC3339))
		case left > 0:
			words = fmt.Sprintf("the version before the last promotion: while a canary runs, setting the spec back to it starts a canary of it; its rollback window (until %s) applies once none runs", c.PreviousUntil.UTC().Format(time.RFC3339))
		}
		st.Evidence = append(st.Evidence, Evidence{"WebApp " + app.Name, ".status.canary.previousRevision", c.PreviousRevision + ": " + words})
	}
	for _, f := range c.Failures {
		allowed := specCheck(spec, f.Name).FailuresAllowed
		st.Evidence = append(st.Evidence, Evidence{"WebApp " + app.Name, fmt.Sprintf(".status.canary.failures[name=%q]", f.Name), fmt.Sprintf("failed %d times, %d allowed", f.Count, allowed)})
	}
	for _, e := range c.Checks {
		words := checkWords(e)
		if during := specCheck(spec, e.Name).During; spec.BlueGreen != nil && during != "" {
			// A check of one part of a blue/green: its evaluation stays from that part.
			words += fmt.Sprintf(" (it gates the %s alone: during %s)", strings.ToLower(string(during)), during)
		}
		st.Evidence = append(st.Evidence, Evidence{"WebApp " + app.Name, fmt.Sprintf(".status.canary.checks[name=%q]", e.Name), words})
	}
	if r, ok := s.child("HTTPRoute", app.Name).(*gwv1.HTTPRoute); ok {
		for i, rule := range r.Spec.Rules {
			var ws []string
			for _, b := range rule.BackendRefs {
				w := int32(1)
				if b.Weight != nil {
					w = *b.Weight
				}
				ws = append(ws, fmt.Sprintf("%s %d", b.Name, w))
			}
			if m := headerMatches(rule); m != "" {
				st.Evidence = append(st.Evidence, Evidence{"HTTPRoute " + r.Name, fmt.Sprintf(".spec.rules[%d].matches", i), m})
			}
			if m := mirrors(rule); m != "" {
				st.Evidence = append(st.Evidence, Evidence{"HTTPRoute " + r.Name, fmt.Sprintf(".spec.rules[%d].filters", i), m})
			}
			st.Evidence = append(st.Evidence, Evidence{"HTTPRoute " + r.Name, fmt.Sprintf(".spec.rules[%d].backendRefs", i), strings.Join(ws, ", ")})
		}
	}
	if d, ok := s.child("Deployment", canaryName).(*appsv1.Deployment); ok {
		st.Evidence = append(st.Evidence, deploymentEvidence(d)...)
		st.Evidence = append(st.Evidence, podEvidence(s.Pods[d.Name])...)
	}
	return st, true
}

// RenderExplain writes each statement, then its evidence under it (object, field: value).
func RenderExplain(w io.Writer, statements []Statement) error {
	var b strings.Builder
	for _, st := range statements {
		b.WriteString(st.Says + "\n")
		for _, e := range st.Evidence {
			if e.Field == "" {
				fmt.Fprintf(&b, "    %s: %s\n", e.Object, e.Value)
				continue
			}
			fmt.Fprintf(&b, "    %s %s: %s\n", e.Object, e.Field, e.Value)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// specCheck is spec's check named name (none: the zero one, whose fields are the defaults).
func specCheck(spec *webappv2.CanarySpec, name string) webappv2.CanaryCheck {
	for _, chk := range spec.Checks {
		if chk.Name == name {
			return chk
		}
	}
	return webappv2.CanaryCheck{}
}

// checkWords is a check's last evaluation: its value against its limit, and where the value came from.
func checkWords(e webappv2.CanaryCheckStatus) string {
	verdict := "did not pass"
	if e.Passed {
		verdict = "passed"
	}
	value := e.Value
	if value == "" {
		value = "no value"
	}
	words := fmt.Sprintf("%s against a max of %s, %s", value, e.Max, verdict)
	if e.Error != "" {
		words += " (" + e.Error + ")"
	}
	words += fmt.Sprintf(", at %s, from %s", e.EvaluatedAt.UTC().Format(time.RFC3339), e.Address)
	if e.Query != "" {
		// (A webhook's has none.)
		words += ": " + e.Query
	}
	return words
}

// previewEvidence says where a blue/green's preview answers (smoke tests go there): its preview host, through a
// second HTTPRoute or Ingress, or its Service alone.
func previewEvidence(app *webappv2.WebApp, canaryName string) Evidence {
	host, e := app.Spec.Rollout.Canary.BlueGreen.PreviewHost, app.Spec.Expose
	switch {
	case host != "" && e != nil && e.Gateway != nil:
		return Evidence{"WebApp " + app.Name, ".spec.rollout.canary.blueGreen.previewHost", fmt.Sprintf("%s: the preview, through HTTPRoute %s on Gateway %s to Service %s alone", host, canaryName, e.Gateway.Name, canaryName)}
	case host != "" && e != nil && e.Ingress != nil:
		return Evidence{"WebApp " + app.Name, ".spec.rollout.canary.blueGreen.previewHost", fmt.Sprintf("%s: the preview, through Ingress %s (class %s) to Service %s alone", host, canaryName, e.Ingress.ClassName, canaryName)}
	}
	return Evidence{"Service " + canaryName, ".spec.selector", "the preview: the new version's pods alone (no preview host: smoke tests go to this Service)"}
}

// retireOf is how long app's canary pods stay after the traffic left them: as the status keeps it while a canary
// runs or retires (a strategy taken out since keeps it), or as the spec says.
func retireOf(app *webappv2.WebApp) time.Duration {
	if c := app.Status.Canary; c != nil && c.RetireSeconds > 0 {
		return time.Duration(c.RetireSeconds) * time.Second
	}
	return desired.CanaryRetire(app)
}

// retiringEvidence says that the pods of a version the spec left retire, and until when.
func retiringEvidence(app *webappv2.WebApp, c *webappv2.CanaryStatus, canaryName string) Evidence {
	by := trafficBy(app)
	words := fmt.Sprintf("the spec left this version while %s sent it traffic: its pods (%s) retire, %s sending them nothing, so requests already on their way are answered", by, canaryName, by)
	if c.RetiringSince != nil {
		words = fmt.Sprintf("the spec left this version at %s while %s sent it traffic: its pods (%s) retire until %s (%s after the write that takes the traffic off them, if it succeeds later), %s sending them nothing, so requests already on their way are answered",
			c.RetiringSince.UTC().Format(time.RFC3339), by, canaryName, c.RetiringSince.Add(retireOf(app)).UTC().Format(time.RFC3339), retireOf(app), by)
	}
	if c.Phase == "Canary" {
		words += "; the new version's canary starts in their place then"
	}
	return Evidence{"WebApp " + app.Name, ".status.canary.retiringRevision", c.RetiringRevision + ": " + words}
}

// How far the version kept warm is in the canary's Deployment: not there (never made, or gone), starting, or ready.
const (
	warmNone = iota
	warmStarting
	warmReady
)

// warmIn says how far s's canary Deployment (name) runs revision rev, the version kept warm: every pod it asks for
// ready (as the operator's status.RolledOut judges it, so explain and the step machine agree), some not yet, or none
// of it.
func warmIn(s Snapshot, name, rev string) int {
	for _, o := range s.Children {
		d, ok := o.(*appsv1.Deployment)
		if !ok || d.Name != name || d.Annotations[webappv2.AnnotationRevision] != rev {
			continue
		}
		if d.Spec.Replicas != nil && d.Status.ObservedGeneration >= d.Generation && status.RolledOut(d, *d.Spec.Replicas) {
			return warmReady
		}
		return warmStarting
	}
	return warmNone
}

// trafficBy names what sends app's canary its traffic: the route behind a Gateway, or a blue/green's switch without
// one (the Service's selector).
func trafficBy(app *webappv2.WebApp) string {
	if desired.CanarySwitched(app) {
		return "the Service's switch"
	}
	return "the route"
}

// switchWords say how a blue/green's switch sends app's new version the traffic.
func switchWords(app *webappv2.WebApp) string {
	if desired.CanarySwitched(app) {
		return fmt.Sprintf("Service %s selects its pods, without a Gateway", app.Name)
	}
	return fmt.Sprintf("the route sends it to Service %s", desired.CanaryName(app))
}
