package orchard

// Shortcuts (orchard:shortcuts, docs/concepts.md "Shortcuts"): what the plugin's external
// system guarantees, so that the host skips calls its generic flow makes to stay leak-safe on
// any system. Every Go component exports the interface: an actuator that does not implement
// ShortcutDeclarer declares none and gets the generic flow.

// Shortcuts is what an external system guarantees. Declare only what the system itself
// enforces (its API documents it): the conformance kit checks both against the real system.
type Shortcuts struct {
	// CreateRefusesDuplicates: the system refuses to create a resource whose identifying
	// fields (those ListForAdoption matches on) an existing one has — Create then returns a
	// failure and changes nothing. The host skips ListForAdoption before a create and calls
	// it only after a create that failed; ListForAdoption MUST apply (not answer "does not
	// apply") to every object the plugin can create. (PowerDNS answers 409 Conflict for a
	// TSIG key or zone name that exists.)
	CreateRefusesDuplicates bool
	// DeleteIsSynchronous: a Delete that returns done has removed the resource (GetByID
	// answers nil from then on): the host releases the object without reading it back.
	DeleteIsSynchronous bool
}

// ShortcutDeclarer is what an actuator implements, beside Actuator, to declare Shortcuts.
// The SDK detects it on the value given to Export (or NewRaw); mind the receiver, as for
// Versioned. Shortcuts MUST be pure (same answer every time, no I/O).
type ShortcutDeclarer interface {
	Shortcuts() Shortcuts
}

// shortcutsOf is what a declares: none unless it implements ShortcutDeclarer.
func shortcutsOf(a any) Shortcuts {
	if d, ok := a.(ShortcutDeclarer); ok {
		return d.Shortcuts()
	}
	return Shortcuts{}
}
