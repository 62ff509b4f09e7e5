package controller

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/desired"
)

// Planned is one child as a reconcile would write it for a WebApp now.
type Planned struct {
	// Object is an empty object of the child's kind, named and placed as the WebApp's child.
	Object client.Object
	// Apply is the child's complete apply configuration (nil: the child must not exist; a kept one is released).
	Apply runtime.ApplyConfiguration
	// Err: the child cannot be built now (an input unknown, a claim in the way): the operator leaves it as it is.
	Err error
	// Kept: a child of the kind is never deleted; one the WebApp no longer wants is released.
	Kept bool
}

// ErrCanaryDecides is Planned.Err for the Deployments and Services a canary strategy decides: which version each
// runs follows from the canary's state, which only a reconcile moves.
var ErrCanaryDecides = errors.New("decided by the canary's next step")

// PlannedChildren are the children Plan built for a WebApp, and the revision of its pod template.
type PlannedChildren struct {
	Children []Planned
	// Revision is the spec's pod template's revision, as a canary names versions ("": not known, Err says why).
	Revision string
	Err      error
}

// Plan builds every child of app as a reconcile would now: the operator's own builders, with the reads they need
// (the config hash, whether the HPA exists, whether the Deployment is missing, a claim in the way) made through c.
// For kubectl-webapp plan, which dry-runs what it returns. With a canary strategy, the Deployments and Services are
// not built (ErrCanaryDecides).
func Plan(ctx context.Context, c client.Client, app *webappv2.WebApp) PlannedChildren {
	r := &WebAppReconciler{Client: c, APIReader: c}
	// The config hash read whole: Plan has no memo of the sources' versions.
	in, _ := r.readInputs(ctx, app, func(ctx context.Context, app *webappv2.WebApp) (string, error) {
		if refs := configRefs(app); len(refs) > 0 {
			return r.readConfigHash(ctx, app.Namespace, refs)
		}
		return "", nil
	})
	var out PlannedChildren
	if out.Err = in.configErr; out.Err == nil {
		var dep *appsv1ac.DeploymentApplyConfiguration
		if dep, out.Err = desired.Deployment(app, in.Inputs); out.Err == nil {
			out.Revision, out.Err = desired.Revision(dep.Spec.Template)
		}
	}
	for _, k := range children {
		p := Planned{Object: k.objectOf(app), Kept: k.hooks.kept}
		switch {
		case app.Spec.Rollout.Canary != nil && (k.kind == "Deployment" || k.kind == "Service" || k.kind == "ControllerRevision" || k.kind == "HTTPRoute"):
			p.Err = ErrCanaryDecides
		default:
			p.Apply, p.Err = k.build(app, in)
		}
		out.Children = append(out.Children, p)
	}
	return out
}

// objectOf is an empty object of c's kind, named and placed as app's child (kind and apiVersion set).
func (c childKind) objectOf(app *webappv2.WebApp) client.Object {
	obj := c.object()
	obj.SetNamespace(app.Namespace)
	obj.SetName(c.objectName(app))
	obj.GetObjectKind().SetGroupVersionKind(schema.FromAPIVersionAndKind(c.apiVersion, c.kind))
	return obj
}
