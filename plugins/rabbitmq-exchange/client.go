package main

import (
	"strings"

	orchard "orchard.dev/sdk"
)

// client of the RabbitMQ management HTTP API (/api). Credentials come from the object's
// credentials Secret: url (e.g. http://127.0.0.1:15672, without /api), username and
// password of a user with the administrator tag.
type client struct {
	base, user, password string
}

func clientFor[S any](obj *orchard.Object[S]) (*client, error) {
	url, err := obj.Credential("url")
	if err != nil {
		return nil, err
	}
	user, err := obj.Credential("username")
	if err != nil {
		return nil, err
	}
	password, err := obj.Credential("password")
	if err != nil {
		return nil, err
	}
	return &client{strings.TrimRight(url, "/") + "/api", user, password}, nil
}

func (c *client) send(method, path string, body any) (*orchard.Response, error) {
	r := orchard.NewRequest(method, c.base+path).BasicAuth(c.user, c.password)
	if body != nil {
		r = r.JSON(body)
	}
	return r.Send()
}

// get decodes the JSON at path into out; found=false on 404.
func (c *client) get(path, what string, out any) (found bool, err error) {
	r, err := c.send("GET", path, nil)
	if err != nil {
		return false, err
	}
	if r.Status == 404 {
		return false, nil
	}
	if err := r.Check(what); err != nil {
		return false, err
	}
	return true, r.JSON(out)
}

// write is a PUT or POST that must succeed.
func (c *client) write(method, path, what string, body any) error {
	r, err := c.send(method, path, body)
	if err != nil {
		return err
	}
	return r.Check(what)
}

// remove is a DELETE that is done when the object is already gone.
func (c *client) remove(path, what string) error {
	r, err := c.send("DELETE", path, nil)
	if err != nil || r.Status == 404 {
		return err
	}
	return r.Check(what)
}

var q = orchard.PathSegment

// exchange is RabbitMQ's view of an exchange.
type exchange struct {
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"auto_delete"`
	Internal   bool           `json:"internal"`
	Arguments  map[string]any `json:"arguments"`
}

type binding struct {
	Source        string `json:"source"`
	RoutingKey    string `json:"routing_key"`
	PropertiesKey string `json:"properties_key"`
}

type policy struct {
	Definition map[string]any `json:"definition"`
}

func (c *client) vhostExists(vhost string) (bool, error) {
	var v map[string]any
	return c.get("/vhosts/"+q(vhost), "get vhost "+vhost, &v)
}

func (c *client) exchange(vhost, name string) (*exchange, error) {
	var e exchange
	found, err := c.get("/exchanges/"+q(vhost)+"/"+q(name), "get exchange "+name, &e)
	if err != nil || !found {
		return nil, err
	}
	return &e, nil
}

func (c *client) exchanges(vhost string) ([]exchange, error) {
	var found []exchange
	_, err := c.get("/exchanges/"+q(vhost), "list exchanges of vhost "+vhost, &found)
	return found, err
}

func (c *client) putExchange(vhost, name string, body map[string]any) error {
	return c.write("PUT", "/exchanges/"+q(vhost)+"/"+q(name), "declare exchange "+name+" in vhost "+vhost, body)
}

func (c *client) deleteExchange(vhost, name string) error {
	return c.remove("/exchanges/"+q(vhost)+"/"+q(name), "delete exchange "+name)
}

// bindingsTo are the bindings whose destination is the exchange.
func (c *client) bindingsTo(vhost, name string) ([]binding, error) {
	var found []binding
	_, err := c.get("/exchanges/"+q(vhost)+"/"+q(name)+"/bindings/destination", "list bindings of exchange "+name, &found)
	return found, err
}

func (c *client) bind(vhost, source, destination, key string) error {
	return c.write("POST", "/bindings/"+q(vhost)+"/e/"+q(source)+"/e/"+q(destination),
		"bind exchange "+destination+" to "+source, map[string]any{"routing_key": key, "arguments": map[string]any{}})
}

func (c *client) unbind(vhost, source, destination, propertiesKey string) error {
	return c.remove("/bindings/"+q(vhost)+"/e/"+q(source)+"/e/"+q(destination)+"/"+q(propertiesKey),
		"unbind exchange "+destination+" from "+source)
}

func (c *client) policy(vhost, name string) (*policy, error) {
	var p policy
	found, err := c.get("/policies/"+q(vhost)+"/"+q(name), "get policy "+name, &p)
	if err != nil || !found {
		return nil, err
	}
	return &p, nil
}

func (c *client) putPolicy(vhost, name string, body map[string]any) error {
	return c.write("PUT", "/policies/"+q(vhost)+"/"+q(name), "put policy "+name, body)
}

func (c *client) deletePolicy(vhost, name string) error {
	return c.remove("/policies/"+q(vhost)+"/"+q(name), "delete policy "+name)
}
