package plugin

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller"
	"github.com/example/webapp-operator/controller/canary"
)

// The person's actions on a canary (promote, abort, retry) are the annotation webappv2.AnnotationAction, which
// these commands apply for the user, under their own field manager: the operator acts on a value once, where it
// makes sense. Whether it does is decided here first, from the status, so a command that would act on nothing
// says why instead.

// actionFieldManager is the field manager the commands apply the annotation with.
const actionFieldManager = "kubectl-webapp"

// actionValue is the annotation's value for verb on app now (at at: each run a new value), or why it would act on
// nothing. specRevision is the revision of the spec's pod template (for retry: the operator retries only the
// version the spec still asks for).
func actionValue(app *webappv2.WebApp, verb string, full bool, specRevision string, at time.Time) (string, error) {
	c := app.Status.Canary
	if app.Spec.Rollout.Canary == nil || c == nil {
		return "", fmt.Errorf("WebApp %s has no canary strategy (spec.rollout.canary)", app.Name)
	}
	stamp := at.UTC().Format(time.RFC3339)
	switch verb {
	case "promote":
		if c.Phase != "Canary" {
			return "", fmt.Errorf("WebApp %s has no canary to promote: it is %s", app.Name, c.Phase)
		}
		if full {
			return canary.PromoteFull(c.CanaryRevision) + " at " + stamp, nil
		}
		return canary.PromoteStep(c.CanaryRevision, int(c.Step)) + " at " + stamp, nil
	case "abort":
		switch c.Phase {
		case "Canary":
			return canary.Abort(c.CanaryRevision) + " at " + stamp, nil
		case "Promoting":
			if c.Reason == webappv2.ReasonRolledBackToPrevious {
				// The way back to a version kept warm: it is the version the spec asks for, with nothing to go back to.
				return "", fmt.Errorf("WebApp %s is rolling back to revision %s, the version its spec was set back to: there is no canary to abort (set the spec forward again to leave it)", app.Name, c.CanaryRevision)
			}
			// The stable Deployment rolls back to the version it ran (kept until the promotion completes).
			return canary.Abort(c.CanaryRevision) + " at " + stamp, nil
		}
		return "", fmt.Errorf("WebApp %s has no canary to abort: it is %s", app.Name, c.Phase)
	case "retry":
		if c.Phase != "RolledBack" || c.FailedRevision == "" {
			return "", fmt.Errorf("WebApp %s has no rolled-back version to retry: it is %s", app.Name, c.Phase)
		}
		if specRevision != c.FailedRevision {
			return "", fmt.Errorf("WebApp %s's spec no longer asks for the rolled-back revision %s (it asks for %s, which the operator starts by itself)", app.Name, c.FailedRevision, specRevision)
		}
		return canary.Retry(c.FailedRevision) + " at " + stamp, nil
	}
	return "", fmt.Errorf("unknown action %q", verb)
}

// act applies the action verb to the WebApp name: the annotation, under actionFieldManager (forced: the action is
// the user's to give, whichever of their tools set it before).
func (o *options) act(ctx context.Context, name, verb string, full bool) (string, error) {
	c, ns, err := o.clientIn()
	if err != nil {
		return "", err
	}
	app := &webappv2.WebApp{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, app); err != nil {
		return "", err
	}
	var specRevision string
	if verb == "retry" {
		planned := controller.Plan(ctx, c, app)
		if planned.Err != nil {
			return "", fmt.Errorf("the revision of WebApp %s's spec: %w", name, planned.Err)
		}
		specRevision = planned.Revision
	}
	value, err := actionValue(app, verb, full, specRevision, time.Now())
	if err != nil {
		return "", err
	}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(webappv2.GroupVersion.String())
	u.SetKind("WebApp")
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetAnnotations(map[string]string{webappv2.AnnotationAction: value})
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(actionFieldManager), client.ForceOwnership); err != nil {
		return "", err
	}
	return value, nil
}

func newActionCommand(o *options, verb, short, example string) *cobra.Command {
	var full bool
	cmd := &cobra.Command{
		Use:               verb + " NAME",
		Short:             short,
		Example:           example,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeWebApps,
		RunE: func(cmd *cobra.Command, args []string) error {
			value, err := o.act(cmd.Context(), args[0], verb, full)
			if err != nil {
				return err
			}
			_, err = io.WriteString(o.io.Out, fmt.Sprintf("webapp.example.com/%s annotated: %s=%q\n", args[0], webappv2.AnnotationAction, value))
			return err
		},
	}
	if verb == "promote" {
		cmd.Flags().BoolVar(&full, "full", false, "Promote all the way: every step left passes now, its pauses, checks and gates with it")
	}
	return cmd
}

func newActionCommands(o *options) []*cobra.Command {
	return []*cobra.Command{
		newActionCommand(o, "promote", "Pass the canary's current step now (its pause, checks and gate), or every step with --full",
			"  kubectl webapp promote web          # the step it is at (a gate waiting for a person, say)\n  kubectl webapp promote web --full   # all the way"),
		newActionCommand(o, "abort", "Roll the running canary back now: the stable version serves everything",
			"  kubectl webapp abort web"),
		newActionCommand(o, "retry", "Start the rolled-back version's canary again, from its first step",
			"  kubectl webapp retry web"),
	}
}
