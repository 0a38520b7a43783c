package crashfs

// SetHooks sets the functions called in the gaps where a rename and a
// walk of the tree could meet: listed by look, with the FS's lock held,
// between the listing of a directory and the Lstat of its names;
// renaming by Rename just before the real rename. nil removes one. It
// must be called while no other call uses the FS.
func SetHooks(fsys *FS, listed func(rel string), renaming func()) {
	fsys.listed, fsys.renaming = listed, renaming
}
