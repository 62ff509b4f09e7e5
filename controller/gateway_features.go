package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
)

// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways;gatewayclasses,verbs=get

// gatewayLacks says which of features (Gateway API feature names) the class of app's Gateway does not list in its
// status.supportedFeatures ("" when it lists them all). A gateway that lacks a filter answers the requests of the
// rule that has it with errors (Traefik 3.6 answers 500 to every request of a rule with a RequestMirror), so what
// the class does not say it supports is not asked of it. Both are read from the API server, not watched: only while
// a canary whose plan needs a feature runs. A Gateway or class that is not there, or that the operator may not
// read, lists nothing; another error is transient.
func (r *WebAppReconciler) gatewayLacks(ctx context.Context, app *webappv2.WebApp, features []string) (string, error) {
	e := app.Spec.Expose
	if len(features) == 0 || e == nil || e.Gateway == nil {
		return "", nil
	}
	ns := e.Gateway.Namespace
	if ns == "" {
		ns = app.Namespace
	}
	needs := strings.Join(features, " and ")
	// Forbidden: a namespaced install (watchNamespaces) reads no GatewayClass, nor a Gateway elsewhere.
	unreadable := func(what string, err error) string {
		hint := ""
		if apierrors.IsForbidden(err) {
			hint = "; grant the operator get on gateways and gatewayclasses (gateway.networking.k8s.io) to mirror"
		}
		return fmt.Sprintf("%s could not be read (%v), so nothing says it supports %s, which the plan's mirror needs%s", what, err, needs, hint)
	}
	gw := &gwv1.Gateway{}
	if err := r.reader().Get(ctx, types.NamespacedName{Namespace: ns, Name: e.Gateway.Name}, gw); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || meta.IsNoMatchError(err) {
			return unreadable(fmt.Sprintf("Gateway %s/%s", ns, e.Gateway.Name), err), nil
		}
		return "", err
	}
	class := &gwv1.GatewayClass{}
	if err := r.reader().Get(ctx, types.NamespacedName{Name: string(gw.Spec.GatewayClassName)}, class); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || meta.IsNoMatchError(err) {
			return unreadable(fmt.Sprintf("GatewayClass %s of Gateway %s/%s", gw.Spec.GatewayClassName, ns, gw.Name), err), nil
		}
		return "", err
	}
	var missing []string
	for _, f := range features {
		if !slices.ContainsFunc(class.Status.SupportedFeatures, func(s gwv1.SupportedFeature) bool { return string(s.Name) == f }) {
			missing = append(missing, f)
		}
	}
	if len(missing) == 0 {
		return "", nil
	}
	return fmt.Sprintf("GatewayClass %s of Gateway %s/%s does not list %s in status.supportedFeatures, which the plan's mirror needs (a gateway without it answers the route's requests with errors): take mirrorPercent out of the steps and retry the version (kubectl webapp retry), or use a gateway that supports it",
		class.Name, ns, gw.Name, strings.Join(missing, " and ")), nil
}
