// Package wal is walq's write-ahead log: a sequence of records, each with a
// log sequence number (LSN), stored in segment files written through
// github.com/tidwall/wal and framed so that every byte is checked.
//
// # Usage
//
//	l, err := wal.Open(dir, nil) // nil: defaults (SyncAlways, 4 MiB segments)
//	lsn, commit, err := l.Append(rec) // cheap; call it under your own lock
//	lsn, commit, err = l.AppendJoined([][]byte{head, payload, tail}, false, true) // one record, its parts joined
//	err = commit.Wait()               // durable once it returns nil
//	lsn, commit, err = l.AppendLate(rec) // nobody waits: under SyncNever and SyncInterval written up to a millisecond later
//	r := l.NewReader(lsn)             // or l.Read(lsn) for one record
//	err = l.View(lsn, check)          // one record, uncopied: check must not write or keep it
//	lsn, rec, err = r.Next()          // io.EOF once caught up
//	err = l.TruncateFront(lsn)        // drop whole segments below lsn
//	err = l.Close()
//
// # Guarantees
//
//   - Records are numbered Options.StartLSN (1 by default), +1, +2, … in
//     the order Append was called; an LSN is stable across restarts,
//     repairs and truncation. It is never reused, except for the records
//     of a torn tail (never acknowledged under SyncAlways) and those dropped
//     by a Salvage cut of the last segment. A log left with no records at
//     all (its only segment torn to nothing) resumes at StartLSN, so a
//     caller with its own high-water mark passes mark+1.
//   - Group commit: records appended while the previous group was being
//     written form the next group, which is written as one log entry with
//     one CRC and, under SyncAlways, covered by one fsync. Commit.Wait
//     returns only after the fsync that covers its record. AppendAll puts
//     its records in one group whatever their size: a crash keeps all of
//     them or none.
//   - A failed write or fsync poisons the Log: the error is sticky, every
//     later Append, Flush, TruncateFront and Wait returns it, and nothing
//     is retried and trusted (the kernel may have dropped the dirty pages).
//     Reads of what was written before keep working. Reopen to recover.
//     Poisoned is a channel closed at that moment, whoever met the failure
//     (a caller, the background syncer or the write-back goroutine), for
//     those who wait on the Log.
//   - Every segment create, rename and remove is followed by an fsync of the
//     directory (tidwall/wal does none), and every directory Open creates
//     is fsynced into its parent (MkdirAll).
//   - No durability rests on tidwall/wal's own fsyncs: walq fsyncs, itself,
//     every segment whose records it counts durable (the tail after a
//     write, a sealed segment at its roll before the directory) through
//     Options.FS. See "The file-system seam" below.
//   - Nothing is written into a new segment before walq has fsynced the
//     segment its roll sealed, under every sync mode (SyncNever too
//     fsyncs at a roll): a batch of groups that rolls is written in parts,
//     one write for each segment it reaches, the groups up to the one that
//     seals a segment first, the rest only after walq fsynced that segment
//     and the directory. (A tail that Open found past SegmentSize, and
//     fsynced, is sealed by the first write, before its first entry, into
//     a segment walq created, and fsynced the directory for, before that
//     write.) So a power loss cannot keep entries of the new segment and
//     lose the sealed one's end, whatever tidwall/wal fsyncs at its roll.
//   - No entry is written into a segment that reached SegmentSize. A
//     power loss that takes the name of the segment a roll created leaves
//     the sealed segment the tail; one that the entry sealing it filled to
//     exactly SegmentSize, tidwall/wal would append to. So a writable Open
//     that leaves the tail at exactly SegmentSize (as the crash left it,
//     or cut to it: zeros or a torn entry after it, a torn roll) fsyncs
//     it, then creates the next segment, empty, and fsyncs the directory,
//     before anything is written (seal.go: rollFullTail). A second power
//     loss, during that Open or after, then leaves the full segment under
//     the segment named after its last entry, or as the tail again, never
//     under a tail named past it with its last entries lost: that is a
//     missing segment, and Open refuses it (ErrCorrupt). A log an earlier
//     release left so (it appended the reopen's first entry into the full
//     segment, and a second power loss kept the name of the segment the
//     entry's roll created but not the entry) is refused as well, by a
//     salvaging Open too: nothing on disk tells it from a missing
//     segment. The empty tail holds nothing: moving it out of the
//     directory lets the log open with every record, the lost entry's
//     unacknowledged ones aside.
//   - A power loss during a roll can keep the new segment, empty, and lose
//     the sealed segment's last bytes (nothing past them was acknowledged:
//     they wait for the roll's fsync). Open repairs it as a torn tail one segment
//     back: the tail, if it holds nothing but zeros or entries that carry on,
//     is removed, then the sealed segment is cut (reported in Torn). Once
//     the roll's fsync made the sealed segment durable and the log was
//     idle, a witness in the new tail (see "Witnesses") says so, and damage
//     to the sealed segment's last entry is then damage, never a torn
//     roll. A read-only Open finds it too and reports it, changing nothing; a
//     salvaging Open repairs it as well, keeping the same records, unless
//     the damaged end can have held the entries the tail's name counts
//     (see "Damage under an empty tail" below): that end is salvaged,
//     never cut; and it never gives out again an LSN the damaged end may
//     have held synced (the same section). A sealed segment
//     that ends whole short of the tail's name is taken for a torn roll
//     only while shorter than SegmentSize; a salvaging or read-only Open
//     not given SegmentSize does not know the writer's and never takes
//     it, so a missing segment is never taken for a torn roll there: it
//     refuses an empty tail named past such a segment with ErrCorrupt
//     that says it cannot tell the two apart and that the writer's
//     SegmentSize tells.
//   - On Open a torn or zero-filled tail of the last segment is cut back to
//     the last whole entry, but only when no valid entry follows the damage,
//     or only entries that show a torn write (see "Torn writes past a hole"
//     below), and the log still reaches Options.MustReach (a caller's snapshot);
//     the cut is reported by Report().Torn. A log that ends before
//     MustReach lost records: ErrCorrupt, never a torn tail. The cut is made
//     only after every check of Open passed, so a refused log is left as
//     it was; a tail file without one valid entry that is not named where
//     walq's next segment would be (after every entry of the segment
//     before, the damaged ones a salvage skips included) is not walq's and
//     is refused, never cut (see "Damage under an empty tail" below); one
//     named inside the entries of the segment before, where no segment
//     starts, with ErrForeign: move it out.
//     Damage anywhere else is
//     ErrCorrupt, wrapped with the segment, the byte offset and the entry
//     index: in the last segment, in sealed segments' first headers, and
//     where a sealed segment's last entry does not end at the LSN the next
//     one starts at (a missing segment), at Open; elsewhere in sealed segments when a Reader or Read first touches
//     the segment (each sealed segment is verified in full, once, on first
//     use), or by Verify. Nothing is ever truncated silently.
//   - With Options.Salvage every sealed segment is scanned at Open; damaged
//     entries are skipped (Readers jump over them, Read returns ErrNotFound
//     for their LSNs) and each skip is reported in Report().Salvaged with the
//     LSNs lost. Damage in the last segment is then cut at its first bad
//     entry, dropping what follows, and reported the same way. A log that
//     ends before MustReach is reported the same way, and the next record
//     gets LSN MustReach+1 in a new segment, so no LSN is ever reused.
//     Damage in a sealed segment past the log's last record (the last
//     sealed segment under an empty tail) hides its LSNs: they are
//     reported lost up to the most its bytes can hold, and the log resumes
//     after them, so no LSN a synced entry had is given out again. Damage
//     with no record before or after it in the log (and not one entry
//     whose header passed its CRC) bounds no LSN: the salvage refuses it
//     (ErrCorrupt), saying what to do.
//   - Read returns a copy of the record, the caller's to keep and change.
//     View passes its fn the record as the log caches it, not a copy: fn
//     must not write into it (every later Read and View of the record would
//     see the write) nor keep it, or a slice of it, past its return.
//   - Options.ReadOnly opens without tidwall/wal and writes nothing: a torn
//     tail, or a torn roll, is reported but not cut. Verify checks every
//     entry of every segment; to inspect a damaged log, open it ReadOnly
//     with Salvage.
//     Beside a process writing the log it lists the directory again after
//     opening the segments, and starts over when a roll or TruncateFront
//     changed it under the listing (listing.go); the files it opened stay
//     readable whatever the writer removes afterwards.
//
// # Torn writes past a hole
//
// A power loss tears the writes no fsync covered at sector granularity and
// in any order: over blocks the file already has (zeros written ahead of
// the tail), a later sector, even a later whole entry,
// can reach the disk without an earlier one, leaving whole entries after
// a hole. Under SyncAlways several entries can be written and unsynced at
// once (a group with a WaitWritten caller is written while an fsync is in
// flight). So every entry records the log's DurableLSN when its write was
// issued (its Synced LSN; see "On-disk format"), and at the first bad
// entry of the last segment, at offset B, whose records start at L+1 (L
// the last LSN of the whole entries before it), Open applies the tear
// rule. A valid entry after B that starts at or before L is passed over:
// it is bytes a record holds (a copy of an earlier entry, say), as before
// version 2. If no other valid entry follows, the damage is a torn tail,
// as always. If one follows, the damage is a torn write, and everything
// from B on is cut and reported in Report().Torn, iff all three hold:
//
//   - every such entry is of version 2 and has a Synced LSN of L or less:
//     no entry was written after an fsync that covered a record of the
//     damaged region;
//   - the damage, from B to the first such entry, holds a sector (512
//     bytes, aligned in the file) that is all zeros from B, or from the
//     sector's start, to its end: a sector the write never reached, where
//     the zeros ahead of the tail were;
//   - the file's last whole aligned sector, and the bytes after it, are
//     zeros and lie past the last such entry: zeros ahead of the tail
//     that no write reached. A log that was closed, or never had zeros
//     written ahead of its tail, ends at its last entry (or in a torn
//     piece of it); fewer zeros than a sector can be a record's own bytes.
//
// Otherwise the damage is ErrCorrupt (under Salvage, a cut reported in
// Report().Salvaged), as is damage followed by a version-1 entry that can
// continue the log. The second and third conditions exist because an
// entry's Synced LSN understates what is durable: Close, Flush and the
// fsyncs of SyncInterval make records durable after their entries were
// written, and a later bit flip or lost sector in them, valid entries
// after it, is damage, never a tear. Shape alone cannot tell that (a
// record's own zeros are an aligned zero sector; at a sector's last byte
// one zero byte is), so after such an fsync the log writes a witness
// (see "Witnesses" below), an entry whose Synced LSN covers them: damage
// it follows is ErrCorrupt by the first condition. So a hole that a power loss leaves
// in bytes appended at the file's end, with later appended bytes kept, is
// refused: the file then ends at what it kept, as a closed log does. For
// damage at the segment's first entry L is the end of the segment before
// it; when that segment is not whole, or there is none, L is unknown and
// any valid entry after the damage makes it ErrCorrupt. Verify judges
// the last segment by the same rule (a read-only Log's whole file; a
// writable one's written bytes). The damaged end of a torn roll's
// sealed segment (see Guarantees) is not judged by it: a valid entry
// after the damage there still makes it ErrCorrupt, since a salvaging
// Open bounds that end by its bytes and resyncs past the damage, and
// would keep other records than a plain Open cutting it as a tear.
//
// What the rule cannot tell: damage shaped as a tear (an aligned sector
// of zeros, a lost sector say) to records whose fsync completed, when no
// entry's write, a witness's included, began after DurableLSN rose to
// cover them (or none reached the disk) and the file ends in a whole
// sector of zeros past the valid entries, is cut as a tear, exactly as
// damage to the last entry of a log always was. With witnesses that is
// the window between an fsync and its witness reaching the disk (below),
// and records of a tail the witness would have rolled.
//
// # Witnesses
//
// A witness is a version-2 entry with Count 0 (see "On-disk format"):
// First LSN is the LSN the next record gets, Synced LSN the log's
// DurableLSN, and it holds no record and takes no LSN, so every reader
// (Readers, Read, View, Verify, the scans of Open and Salvage, read-only
// opens) passes over it. The committer writes one when an fsync has made
// every record written durable, DurableLSN is above the Synced LSN of
// every entry written, and no group waits to be written (that group's
// entry would carry DurableLSN itself):
//
//   - Flush writes it after its fsync, before it returns;
//   - SyncInterval: at once after a tick's fsync; after an fsync a write
//     made (the interval had passed), 2 ms later if nothing was written;
//   - SyncAlways: 2 ms after the last fsync if the log stayed idle, so a
//     caller that appends again at once, a steady lone caller among them,
//     names the records by its own entry and costs no extra write (after
//     a busy spell the log looks less often, so a witness can come up to
//     128 ms after it ends: the timer is not armed at every fsync);
//   - SyncNever: only by Flush (a roll's fsync covers the sealed
//     segments, not the records written to the new tail);
//   - a writable Open: it fsyncs every record it finds, those a process
//     crash left unsynced included; unless the log's last entry is a
//     witness of them, one is written 2 ms after the Open if the log
//     stayed idle (a caller that appends at once names them itself);
//   - Close writes none: a closed log ends at its last entry, and damage
//     that a valid entry follows is then refused by the third condition.
//     (A flipped bit in the last entry of a closed log, which no valid
//     entry follows, is cut as a torn tail, as it always was; damage
//     before it is refused.)
//
// None is written where it would roll the segment: a sealed segment's
// last entry holds records. One is written into the empty tail a roll
// leaves, so a segment can start with one: the roll fsynced the sealed
// segment before anything was written to the new one, so an entry there,
// a witness included, says the sealed segment's last entry is durable,
// and damage to it is damage (see "Damage under an empty tail"), not a
// torn roll. Two are never adjacent (the second needs DurableLSN to rise,
// which needs a record written and fsynced since the first).
//
// What protects a flushed or idle log, and when: a witness is written,
// not fsynced. Its records were durable before its write began, so no
// power loss can keep it and lose them (it never turns a real tear into a
// refusal), and a power loss that loses or tears it leaves the file as it
// was before it (a torn witness at the end is a torn tail, cut; when its
// frame length survived, Report().Torn says it lost no LSN, LastLSN being
// FirstLSN-1, if its version byte is 2 or, cut before it, the entry
// before it is of version 2; a witness that starts its segment, the one a
// roll's empty tail gets, has no entry before it and needs its version
// byte). It
// protects the records once it is on the disk: at the next fsync (it
// makes the log dirty, so a second Flush, or Close, fsyncs it; under
// SyncInterval the next tick, which it arms; under SyncAlways the next
// group's fsync), or when the kernel writes the page back (about 30 s by Linux's default
// dirty_expire_centisecs). Until then the records are as unnamed as
// without it.
//
// A log written by this version holds version-2 entries, which an older
// walq takes for a torn tail and cuts: it must not be opened by an older
// version (package queue records this in its directory's format, which
// older releases refuse; a bare wal user must see to it).
//
// # Damage under an empty tail
//
// A roll leaves an empty tail segment, named by the tidwall/wal index
// after the sealed segment's last entry; it is walq's if that is its name.
// When the sealed segment is damaged, how many entries it held rests on
// the damaged region, and a frame length is covered by no CRC: after a CRC
// failure a length cannot be trusted, so a salvage never counts entries
// by walking lengths. It bounds them instead: a region starts at a frame,
// so it held one entry at least; every frame takes at least 19 bytes (a
// version-1 entry; a version-2 one takes 27, a witness 26), so its bytes
// bound the count from above. The LSNs it lost bound nothing: a witness
// takes none. A region whose bytes
// after a length of the right size pass every check of an entry, CRC
// included, is that one entry with its length damaged, and its header
// gives its LSNs exactly. The tail is then
//
//   - refused, never cut, when its name lies outside the bounds: not
//     walq's;
//   - taken when the bounds are one count, or when it holds nothing but
//     zeros (nothing of it can be destroyed);
//   - taken, and cut, when its bytes start as the log's next entry would,
//     the first write to it that a crash tore: a frame length an entry
//     can have, version 1 or 2, and as far as the file holds them, a first LSN
//     among those the log can have reached (after its last record, up to
//     the bound below) and a count the length can hold. A file too short
//     to hold the version byte tells nothing and is not taken;
//   - otherwise refused with ErrCorrupt that says what to do (move the
//     file out if it is not walq's, remove it if it is: a first write a
//     crash tore), since a torn write of walq's and a foreign file cannot
//     be told apart there, and cutting a file that is not walq's destroys
//     what it holds, while a refusal only waits for a decision.
//
// The LSNs of such a region's records past the log's last record are
// bounded the same way: one entry of one-byte records is the most its
// bytes can hold (exact when its header passes the CRC), and the log
// resumes past that bound rather than after its last readable record.
// That needs its first LSN: a record before it in the log, or a region
// before it whose LSNs are bounded. Without one (the segment is the log's
// first, damaged from its start: its front may have been truncated, or it
// began at a StartLSN that a reopen need not repeat), nothing bounds the
// LSNs it held, and any LSN the log resumes at may be one a synced entry
// had: a salvaging Open, read-only too, refuses with ErrCorrupt, which
// says what to do (with an LSN known to be past every one the log gave
// out, move the damaged segments out and open with StartLSN set to it).
//
// A torn roll (see Guarantees) leaves a damaged end under such a tail
// too. A salvage takes that end as damage, reported lost and resumed
// past, when its bounds reach the tail's name. When the name lies past
// them, the crash cut the file short of what the roll wrote, and the
// salvage cuts the end as a plain Open does, keeping the same records;
// but a synced entry that rotted, its witness and the roll's writes lost
// to the crash, looks the same, so unless the end bears the mark of a
// write that never reached the disk (zeros only, or one frame the end of
// the file cuts behind which no whole entry lies: a synced entry's file
// does not grow shorter, and a frame length rotted to run past the end
// leaves the entry whole behind it, found from its count and its records'
// framing and CRC checked), the cut is reported in Report().Salvaged as
// losing the most LSNs its bytes can hold, from the LSN after the records
// before it, and the log resumes past them, at a segment boundary. When no
// record (or bounded region) before it tells that LSN, the salvage
// refuses it as damage nothing bounds (above). A segment that ends whole
// short of the name (and of a SegmentSize given) is repaired as a plain
// Open repairs it.
//
// # Zeros ahead of the tail
//
// An fdatasync that carries data over blocks the file already has is
// cheaper than one that must also commit a new file size (1.45 to 1.9
// times on the disk of bench/results/fdatasync-2026-12-03.txt). So the
// committer keeps the tail file longer than its entries: when the written
// end comes within 256 KiB of the file's end, it writes zeros up to 1 MiB
// past the written end (never past the segment size, rounded down to a
// page, where a sealed segment's last entry ends at the latest), and the
// entries written next overwrite them. Under SyncAlways the fsync job
// writes them, outside the committer's lock, before its fdatasync, which
// makes them durable with the records it covers: no caller waits for an
// fsync of zeros alone, nor for their write. Until they are written the
// committer writes nothing that reaches them (a group with a WaitWritten
// caller, written while the fsync runs, waits for them). Only under
// SyncAlways: under SyncNever no fsync is saved, and under SyncInterval
// one per interval is, for a write and an fdatasync of the zeros under
// the committer's lock per 768 KiB of entries, which cost more (measured
// in bench/results/extender-offpath-2026-12-05.txt). Options.AppendOnly
// turns it off under SyncAlways too, for file systems that do not
// overwrite in place. The zeros are
// never records:
//
//   - Readers, Read and Verify on a live Log read up to the end of the
//     entries written;
//   - Open takes zeros from the last entry to the end of the tail file for
//     a clean end (no Report().Torn) and cuts them before tidwall/wal
//     opens the tail; a read-only Open and its Verify take them so too;
//   - a sealed segment holds none: they stop where its last entry ends
//     at the latest. Should a sealed file still hold zeros after its last
//     entry, a roll cuts them and fdatasyncs the file before the directory
//     sync; a crash that loses that cut leaves them after the last sealed
//     segment's last entry, which Open cuts;
//   - Close cuts them before its last fsync, so a closed log ends at its
//     last entry.
//
// Over the zeros a power loss tears writes by sector, in any order; "Torn
// writes past a hole" above says how Open tells such a tear from damage.
// A failed write, fdatasync or cut of the zeros poisons the Log, except a
// write of zeros that finds the disk full (ENOSPC, EDQUOT): the file is
// cut back to where they began, the records are fsynced without them and
// that tail takes no more zeros until it rolls, so the space left is for
// records (a record's own failed write poisons).
//
// # Sync modes and what a crash can lose
//
//   - SyncAlways (default): nothing whose Wait returned nil is lost.
//   - SyncInterval: groups are written at once (a record of AppendLate up
//     to a millisecond later: see Concurrency) and fsynced at most every
//     Options.SyncInterval; Wait returns after the write. A power loss can
//     lose the records of the last interval. A process crash (kill -9)
//     loses nothing that was written.
//   - SyncNever: fsync only at segment roll-over, Flush and Close; Wait
//     returns after the write. A power loss can lose everything since the
//     last roll-over; a process crash loses nothing that was written.
//
// Under every mode a process crash can lose a record whose Wait has not
// returned: it may not be written yet. Under SyncInterval and SyncNever a
// record of AppendLate may stay unwritten up to a millisecond after it was
// appended, unless another caller's write takes it sooner.
//
// In every mode Flush returns once everything appended before it is
// written and fsynced, and DurableLSN tells what an fsync covers.
// Under SyncInterval and SyncNever a goroutine of the Log asks the kernel
// to start writing the tail segment back every 512 KiB written
// (sync_file_range; writeback.go; on other platforms, which have no such
// hint, no goroutine runs), so that the fsync at a roll,
// which its caller waits for, finds little left to write; a quarter of a
// segment before the roll it fdatasyncs the tail instead, through a
// handle opened for that fsync alone. Neither is counted: nothing is
// counted durable but by the committer's and the syncer's fsyncs; a hint
// refused as unsupported is not made again, one refused for lack of
// memory is skipped, as is a flush whose handle cannot be opened for lack
// of descriptors or memory (it made no fsync), and a hint or flush that
// fails otherwise poisons the Log. A kernel before Linux 4.13 reports a
// write-back error to the first fsync of the file through any handle, the
// flush's too, so the committer counts its own fsync durable only once
// the flush in flight has ended and the Log is still healthy.
//
// Under SyncAlways the callers an fsync releases usually append again at
// once, so the next fsync waits for as many callers as were blocked in
// Wait when the last one ended, at most twice the time they took to come
// back the round before, within half and the whole of that fsync's time
// and never more than a millisecond (gather.go); the first caller to come
// once that time is up starts the fsync itself. A lone caller, a caller
// after a pause, and callers that wait only for the write (WaitWritten)
// are never held. The wait changes only when an fsync starts, never what
// it covers.
//
// # On-disk format
//
// A log directory holds segment files named by the 20-digit tidwall/wal
// index of their first entry (00000000000000000001, …). tidwall/wal frames
// each entry as
//
//	| uvarint(len(entry)) | entry (len bytes) |
//
// and walq's entry (one commit group) is, in version 2, the one written
//
//	| CRC-32C (4B, little endian) | Version (1B) = 2 |
//	| First LSN (8B, little endian) | Count (4B, little endian) |
//	| Synced LSN (8B, little endian) |
//	| Count × ( uvarint(len(record)) | record ) |
//
// and in version 1, written by older versions and still read everywhere
// (sealed segments, Readers, Verify, Salvage, the repairs), the same
// without Synced LSN:
//
//	| CRC-32C (4B, little endian) | Version (1B) = 1 |
//	| First LSN (8B, little endian) | Count (4B, little endian) |
//	| Count × ( uvarint(len(record)) | record ) |
//
// A witness (see "Witnesses" above) is a version-2 entry with Count 0 and
// no records, 25 bytes, 26 framed:
//
//	| CRC-32C (4B, little endian) | Version (1B) = 2 |
//	| First LSN (8B, little endian) | Count (4B) = 0 |
//	| Synced LSN (8B, little endian) |
//
// The CRC-32C (Castagnoli) covers every byte after itself. Count is at
// least 1 but in a witness (a version-1 entry of Count 0 is damage). The
// records of an entry have LSNs First LSN … First LSN+Count-1,
// and the First LSN of an entry is the First LSN plus Count of the entry
// before it, across segment boundaries too. Synced LSN is DurableLSN when
// the entry's write was issued: every record up to it had been fsynced,
// and that fsync had returned, before the write began (0 when nothing
// was). A segment may hold entries of both versions (a log an older
// version wrote, appended to by this one). These constants are part of
// the wire format and must not be changed; testdata/entry.golden (version
// 1), testdata/entry-v2.golden and testdata/entry-witness.golden pin
// them.
//
// tidwall/wal rolls to a new segment before a batch if the tail holds more
// than Options.SegmentSize bytes, and after any entry that brings it to at
// least SegmentSize; so a segment exceeds SegmentSize by less than one
// entry, and a batch that fills a segment exactly leaves an empty tail.
// (A tail of exactly SegmentSize bytes that Open finds is rolled by Open
// itself: see Guarantees. An earlier release appended one more entry to
// it, so a segment it wrote can exceed SegmentSize by that entry and
// less than one more; Open reads such segments as any other.)
// TruncateFront removes the front segments itself: it fsyncs the first
// segment kept if its records are not durable yet (the tail, under
// SyncNever or SyncInterval), creates an empty NAME.FRONT for it, fsyncs
// the directory, removes the older segments, fsyncs, and removes the
// marker, so that a power loss never leaves a log of no record; Open
// finishes a truncation a crash interrupted. The marker, once durable, is
// what commits the truncation, so the removals and fsyncs after it run
// while other callers write and roll (a roll only creates files after
// the tail); TruncateFront returns once they are done. (An older walq
// truncated with tidwall/wal, which leaves NAME.START and NAME.START.TEMP
// files; Open finishes those too and removes temp files.) A NAME.END file (tidwall/wal's TruncateBack
// marker, which walq never writes), a NAME.START file that holds no
// valid entry, or whose first entry is not the log's entry at index NAME
// as the segments left tell it (not the copy of a kept segment a
// truncation writes: start.go), and a NAME.FRONT file (the highest, if
// several) that names no segment (walq's names the first segment kept,
// which is there as long as the marker is), make
// every Open, read-only and salvaging too, fail with ErrCorrupt and
// ErrForeign, changing nothing: finishing any of these truncations would
// remove segments, acknowledged records among them.
//
// # Crash recovery at Open
//
//  1. Remove *.TEMP files; finish an interrupted truncation (remove the
//     segments before a NAME.FRONT file, and the marker; or the segments a
//     NAME.START file replaces, and rename it); fsync the directory.
//  2. Scan the last segment: framing, CRC, version, LSN continuity. Zeros
//     from the end of the last entry to the end of the file are a clean
//     end (see "Zeros ahead of the tail"): nothing is reported, and the
//     zeros are cut in step 4. At the
//     first bad entry, search every later offset for valid entries: if one
//     shows the damage is not a torn write (the tear rule above), fail with
//     ErrCorrupt (or cut under Salvage); otherwise plan an ftruncate at the
//     bad entry (made in step 4, with an fsync of the file and the
//     directory) and report the cut.
//  3. Read the first entry header of every sealed segment (one small pread
//     each) and check that first LSNs grow at least half as fast as entry
//     indexes (a witness takes none, and two are never adjacent), and that each sealed segment's last entry (found by walking
//     a few frames, or searching back from the end: about one entry read)
//     ends where the next segment starts; zeros after the last sealed
//     segment's last entry (a roll's cut a crash lost) are cut. (Under
//     Salvage: scan them all.)
//     If the last sealed segment is torn, or ends short of the index the
//     tail is named by, under a tail a roll created, the crash came during
//     that roll: the sealed segment becomes the tail, and the old tail is
//     to be removed before the cut (under Salvage, a damaged end whose
//     bounds reach the tail's name is salvaged instead).
//  4. Check that a tail without entries is where walq's next segment would
//     be, and that the log reaches MustReach; only then remove the tail of
//     a torn roll, fsync the directory, and make the cut of step 2.
//  5. Open tidwall/wal, check that it sees the same first and last index,
//     fsync the directory, the tail and every sealed segment (a process
//     killed after a batch rolled, before the sealed segment's fsync
//     returned, left its last entries unsynced); WrittenLSN and DurableLSN
//     start at the last record on disk.
//
// # The file-system seam
//
// Every file operation of the package (segment reads, fsyncs, directory
// listings and fsyncs, the repair's cut, truncation's removals) goes
// through Options.FS, a small interface (FS, File) with the real file
// system, OSFS, behind it by default; package recovery writes snapshots
// through the same seam. Crash tests put a file system there that keeps
// only what was fsynced (internal/crashfs) or fails any one call
// (internal/faultfs), and judge what survived from the calls the file
// system received, never from this package's own accounting (DurableLSN).
//
// tidwall/wal writes and rolls the segment files with package os; it sits
// behind a small interface of its own (store), and everything walq assumes
// about it, its file names, its roll rule and which of its writes the FS
// does not see, is in tidwall.go. An FS with a StoreOp method is told of
// each write tidwall/wal makes, and may fail it.
//
// # Concurrency
//
// A Log is safe for concurrent use. Append only copies the record into the
// open group under a short mutex (Log.mu), so callers may call it while
// holding their own lock, which is how they fix the order of their records.
// One committer goroutine owns the store (tidwall/wal); it writes groups,
// fsyncs, rolls and truncates segments (TruncateFront and Flush are
// requests to it; a truncation's caller then removes the files and fsyncs
// the directory itself, outside the committer's mutex, one truncation at
// a time, and Close waits for it: truncate.go). A caller blocked in Wait
// or WaitWritten writes the gathered groups itself under the committer's
// mutex, one caller at a time: the others wait for its write, and one of them writes whatever
// gathered meanwhile (lead.go). Under SyncNever and SyncInterval a
// record of AppendLate, whose caller does not wait, wakes the committer
// at once only while such records are left for it to write; while other
// callers' writes take them first, it arms a timer that makes the
// committer write, a millisecond later at most (the timer's delay; on a
// busy machine the goroutine may run later), whatever nobody wrote
// meanwhile (late.go). It also writes the witnesses (witness.go), at a
// Flush, a tick, or on a timer after an fsync. Beside the committer run the syncer (it makes
// SyncAlways's fsyncs: syncer.go) and, under SyncNever and
// SyncInterval on Linux, the write-back goroutine (hints on the tail's read-only
// handle, which it pins, and the tail's flush on a handle of its own,
// holding no lock: writeback.go); Close waits for the syncer's fsync in
// flight, stops the write-back goroutine and the syncer and waits for
// them, before the last fsync: when Close returns, no goroutine of the
// Log runs. The segment list and each segment's size and index are
// guarded by an RWMutex (Log.seg): the committer publishes a write under it
// only after WriteBatch returned, so readers see only whole entries. A
// truncation takes the removed segments' files out of the list under
// Log.seg's write lock and closes them after it: the last close of a
// removed file frees its cached pages in the kernel, which would hold up
// every write's publish and every Reader meanwhile (truncate.go, dropFront).
// Readers never call tidwall/wal's Read (it mutates a shared cache under a
// read lock): they pread the segment files themselves through read-only
// handles that are reference counted. A Reader less than 64 KiB behind
// the end of the tail copies those bytes, under the read lock, from the
// copy of the tail tidwall/wal keeps in memory, which the committer
// publishes with each write (only bytes below the published size, which
// are never changed; a roll or TruncateFront unpublishes it before its
// storage passes to the next copy), and checks them as it checks the
// file's. A Reader pins the file of the segment it is reading, so
// TruncateFront never closes a file under it; the
// file (and its disk space, once removed) is released when the Reader
// moves on or is closed. A Reader is not safe for concurrent use; create
// one per goroutine, and Close it.
//
// # Memory
//
// tidwall/wal keeps the tail segment in memory (up to SegmentSize), and
// the position of each of its entries (16 bytes each); once the segment
// holds a quarter of SegmentSize or 256 KiB, whichever is less, walq
// reserves that room (SegmentSize plus 64 KiB, at most 16 MiB plus 64
// KiB, and positions for the entries expected), so the copy is not
// regrown as the segment fills (tidwall.go), and a log that writes little
// keeps little. At a roll, and at TruncateFront, the new tail takes over
// the reserved copy, room and all, so a log that has filled a segment
// keeps that room while it is open; a copy regrown past twice the room
// (an entry larger than the room, or a SegmentSize above 16 MiB) is
// dropped at the roll instead. Each
// Reader has a 256 KiB read-ahead buffer; Read keeps the last four decoded
// entries (one, if larger than 1 MiB). The tail segment, and each sealed
// segment read out of order since Open, keeps a sparse index of one point
// (24 bytes) per 4 KiB. Appended records wait in memory until
// written; Append does not block when the disk falls behind.
package wal
