package controller

import (
	"fmt"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
)

// gatewayGroup is the Gateway API's group; its kinds are served only where its CRDs are installed.
const gatewayGroup = "gateway.networking.k8s.io"

// exposedCondition (for a WebApp with spec.expose) says whether app is reachable from outside as spec.expose asks: for an Ingress, once its
// controller has published an address; for an HTTPRoute, the Gateway's verdict in the route's status (Accepted and
// ResolvedRefs of the parent that is ours to name). served says whether the cluster serves HTTPRoute; ing and
// route are the children as observed (nil when missing or unknown); err is the failure to write this spec's one
// (then what the old one says is not this spec's).
func exposedCondition(app *webappv2.WebApp, served bool, ing *networkingv1.Ingress, route *gwv1.HTTPRoute, err error) metav1.Condition {
	c := metav1.Condition{Type: webappv2.ConditionExposed, Status: metav1.ConditionFalse, ObservedGeneration: app.Generation}
	e := app.Spec.Expose
	switch {
	case err != nil && (e.Ingress != nil || served):
		c.Reason, c.Message = applyErrorReason(err), "this spec's route was not applied: "+truncate(err.Error())
	case e.Ingress != nil && ing == nil:
		c.Reason, c.Message = webappv2.ReasonWaitingForAddress, "the Ingress has not been created yet"
	case e.Ingress != nil:
		var addrs []string
		for _, lb := range ing.Status.LoadBalancer.Ingress {
			if a := lb.IP + lb.Hostname; a != "" {
				addrs = append(addrs, a)
			}
		}
		if len(addrs) == 0 {
			c.Reason, c.Message = webappv2.ReasonWaitingForAddress, fmt.Sprintf("the Ingress controller of class %q has not published an address for the Ingress yet", e.Ingress.ClassName)
			break
		}
		slices.Sort(addrs)
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, webappv2.ReasonExposed, fmt.Sprintf("the Ingress controller of class %q serves it at %s", e.Ingress.ClassName, strings.Join(addrs, ", "))
	case !served:
		c.Reason, c.Message = webappv2.ReasonGatewayAPIMissing, "spec.expose.gateway needs an HTTPRoute, and this cluster does not serve gateway.networking.k8s.io/v1 HTTPRoute: install the Gateway API CRDs and an implementation"
	case route == nil:
		c.Reason, c.Message = webappv2.ReasonWaitingForGateway, "the HTTPRoute has not been created yet"
	default:
		c.Status, c.Reason, c.Message = gatewayVerdict(app, route)
	}
	return c
}

// gatewayVerdict reads the route's status for the Gateway spec.expose names: Accepted and ResolvedRefs, both
// True, mean the Gateway routes the app's hosts to it.
func gatewayVerdict(app *webappv2.WebApp, route *gwv1.HTTPRoute) (metav1.ConditionStatus, string, string) {
	gw := app.Spec.Expose.Gateway
	ns := gw.Namespace
	if ns == "" {
		ns = app.Namespace
	}
	name := ns + "/" + gw.Name
	for _, p := range route.Status.Parents {
		// The parent as we name it: a Gateway (the defaults), in its namespace, at our listener (or none).
		ref := p.ParentRef
		pns := app.Namespace
		if ref.Namespace != nil {
			pns = string(*ref.Namespace)
		}
		if string(ref.Name) != gw.Name || pns != ns || ref.Group != nil && *ref.Group != gatewayGroup || ref.Kind != nil && *ref.Kind != "Gateway" ||
			string(ptr.Deref(ref.SectionName, "")) != gw.SectionName {
			continue
		}
		// Only the conditions of the route's current generation count.
		accepted := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionAccepted))
		resolved := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionResolvedRefs))
		switch {
		case accepted == nil || accepted.ObservedGeneration < route.Generation || resolved != nil && resolved.ObservedGeneration < route.Generation:
			return metav1.ConditionFalse, webappv2.ReasonWaitingForGateway, fmt.Sprintf("Gateway %s has not judged the HTTPRoute's current spec yet", name)
		case accepted.Status != metav1.ConditionTrue:
			return metav1.ConditionFalse, webappv2.ReasonRouteNotAccepted, fmt.Sprintf("Gateway %s does not accept the HTTPRoute: %s: %s", name, accepted.Reason, accepted.Message)
		case resolved != nil && resolved.Status != metav1.ConditionTrue:
			return metav1.ConditionFalse, webappv2.ReasonRouteRefsNotResolved, fmt.Sprintf("Gateway %s cannot resolve the HTTPRoute's backend: %s: %s", name, resolved.Reason, resolved.Message)
		}
		return metav1.ConditionTrue, webappv2.ReasonExposed, fmt.Sprintf("Gateway %s accepted the HTTPRoute (controller %s)", name, p.ControllerName)
	}
	return metav1.ConditionFalse, webappv2.ReasonWaitingForGateway, fmt.Sprintf("no controller of Gateway %s has reported on the HTTPRoute yet (is the Gateway there, and does it allow routes from namespace %s?)", name, app.Namespace)
}
