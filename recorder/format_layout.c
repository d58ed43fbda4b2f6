/* format_layout.c -- every row of the byte tables in docs/dump-format.md
 * (ring header, record, communicator state, stack entry, dump preamble,
 * section header, trigger) as a compile-time check of its offset and size:
 * the document is the contract other readers implement, so a layout change
 * that the tables do not follow fails the build of the recorder.  The rows
 * recorder/format.h asserts beside the struct (the record fields the hot
 * path stores together, the communicator's recent[]) are checked there, not
 * twice.  tests/tools/test_layout.py checks that the tables and these two
 * files name the same rows.
 *
 * Thread-safety and signal-safety: no code, only compile-time checks.
 */
#include <stddef.h>
#include "recorder/format.h"

/* Member `f` of struct `s` lies at byte `off` and is `size` bytes long. */
#define NTR_LAYOUT(s, f, off, size)                                                                   \
  _Static_assert(offsetof(struct s, f) == (off) && sizeof(((struct s *)0)->f) == (size),            \
                 "docs/dump-format.md: " #s "." #f " at " #off ", " #size " bytes")


/* `struct ntr_ring_header` */
NTR_LAYOUT(ntr_ring_header, magic, 0, 8);
NTR_LAYOUT(ntr_ring_header, version, 8, 4);
NTR_LAYOUT(ntr_ring_header, header_size, 12, 4);
NTR_LAYOUT(ntr_ring_header, record_size, 16, 4);
NTR_LAYOUT(ntr_ring_header, slot_count, 20, 4);
NTR_LAYOUT(ntr_ring_header, comm_max, 24, 4);
NTR_LAYOUT(ntr_ring_header, comm_recent, 28, 4);
NTR_LAYOUT(ntr_ring_header, stack_max, 32, 4);
NTR_LAYOUT(ntr_ring_header, stack_depth, 36, 4);
NTR_LAYOUT(ntr_ring_header, comm_offset, 40, 8);
NTR_LAYOUT(ntr_ring_header, stack_offset, 48, 8);
NTR_LAYOUT(ntr_ring_header, slot_offset, 56, 8);
NTR_LAYOUT(ntr_ring_header, file_size, 64, 8);
NTR_LAYOUT(ntr_ring_header, head, 72, 8);
NTR_LAYOUT(ntr_ring_header, dropped, 80, 8);
NTR_LAYOUT(ntr_ring_header, comm_count, 88, 4);
NTR_LAYOUT(ntr_ring_header, stack_count, 92, 4);
NTR_LAYOUT(ntr_ring_header, unused, 96, 8);
NTR_LAYOUT(ntr_ring_header, block_offset, 104, 8);
NTR_LAYOUT(ntr_ring_header, block_count, 112, 4);
NTR_LAYOUT(ntr_ring_header, block_positions, 116, 4);
NTR_LAYOUT(ntr_ring_header, pid, 120, 4);
NTR_LAYOUT(ntr_ring_header, ppid, 124, 4);
NTR_LAYOUT(ntr_ring_header, rank, 128, 4);
NTR_LAYOUT(ntr_ring_header, local_rank, 132, 4);
NTR_LAYOUT(ntr_ring_header, world_size, 136, 4);
NTR_LAYOUT(ntr_ring_header, local_world_size, 140, 4);
NTR_LAYOUT(ntr_ring_header, nccl_version, 144, 4);
NTR_LAYOUT(ntr_ring_header, proc_state, 148, 4);
NTR_LAYOUT(ntr_ring_header, exit_code, 152, 4);
NTR_LAYOUT(ntr_ring_header, signo, 156, 4);
NTR_LAYOUT(ntr_ring_header, host, 160, 64);
NTR_LAYOUT(ntr_ring_header, job_id, 224, 64);
NTR_LAYOUT(ntr_ring_header, tracer_version, 288, 16);
NTR_LAYOUT(ntr_ring_header, exe, 304, 128);
NTR_LAYOUT(ntr_ring_header, tsc_base, 432, 8);
NTR_LAYOUT(ntr_ring_header, mono_base_ns, 440, 8);
NTR_LAYOUT(ntr_ring_header, real_base_ns, 448, 8);
NTR_LAYOUT(ntr_ring_header, tsc_hz, 456, 8);
NTR_LAYOUT(ntr_ring_header, bt_depth, 464, 4);
NTR_LAYOUT(ntr_ring_header, bt_signo, 468, 4);
NTR_LAYOUT(ntr_ring_header, bt_tid, 472, 4);
NTR_LAYOUT(ntr_ring_header, ring_place, 476, 4);
NTR_LAYOUT(ntr_ring_header, bt_ip, 480, 384);
NTR_LAYOUT(ntr_ring_header, bt_sym, 864, 3072);
NTR_LAYOUT(ntr_ring_header, env_len, 3936, 4);
NTR_LAYOUT(ntr_ring_header, dumps_written, 3940, 4);
NTR_LAYOUT(ntr_ring_header, env, 3944, 8192);
NTR_LAYOUT(ntr_ring_header, str_offset, 12136, 8);
NTR_LAYOUT(ntr_ring_header, str_size, 12144, 4);
NTR_LAYOUT(ntr_ring_header, str_used, 12148, 4);
NTR_LAYOUT(ntr_ring_header, py_version, 12152, 4);
NTR_LAYOUT(ntr_ring_header, py_state, 12156, 4);
NTR_LAYOUT(ntr_ring_header, clock_offset_ns, 12160, 8);
NTR_LAYOUT(ntr_ring_header, clock_uncert_ns, 12168, 8);
NTR_LAYOUT(ntr_ring_header, clock_sync_tsc, 12176, 8);
NTR_LAYOUT(ntr_ring_header, clock_samples, 12184, 4);
NTR_LAYOUT(ntr_ring_header, py_sites_dropped, 12188, 4);

/* `struct ntr_record` */
NTR_LAYOUT(ntr_record, commit, 0, 8);
NTR_LAYOUT(ntr_record, tsc, 8, 8);
NTR_LAYOUT(ntr_record, tsc_done, 16, 8);
NTR_LAYOUT(ntr_record, comm_id, 24, 8);
NTR_LAYOUT(ntr_record, count, 32, 8);
NTR_LAYOUT(ntr_record, u, 40, 24);
NTR_LAYOUT(ntr_record, phase, 74, 1);
NTR_LAYOUT(ntr_record, redop, 76, 4);
NTR_LAYOUT(ntr_record, rank, 80, 4);
NTR_LAYOUT(ntr_record, nranks, 84, 4);
NTR_LAYOUT(ntr_record, group_id, 100, 4);
NTR_LAYOUT(ntr_record, flags, 106, 2);
NTR_LAYOUT(ntr_record, prev_gap, 116, 4);

/* `struct ntr_comm_state` */
NTR_LAYOUT(ntr_comm_state, comm_id, 0, 8);
NTR_LAYOUT(ntr_comm_state, parent_id, 8, 8);
NTR_LAYOUT(ntr_comm_state, handle, 16, 8);
NTR_LAYOUT(ntr_comm_state, rank, 24, 4);
NTR_LAYOUT(ntr_comm_state, nranks, 28, 4);
NTR_LAYOUT(ntr_comm_state, lifecycle, 32, 4);
NTR_LAYOUT(ntr_comm_state, async_error, 36, 4);
NTR_LAYOUT(ntr_comm_state, coll_seq, 40, 8);
NTR_LAYOUT(ntr_comm_state, last_enqueued, 48, 8);
NTR_LAYOUT(ntr_comm_state, last_completed, 56, 8);
NTR_LAYOUT(ntr_comm_state, rec_count, 64, 8);
NTR_LAYOUT(ntr_comm_state, blocked_since, 72, 8);
NTR_LAYOUT(ntr_comm_state, blocked_kind, 80, 4);
NTR_LAYOUT(ntr_comm_state, blocked_tid, 84, 4);
NTR_LAYOUT(ntr_comm_state, last_enqueue_tsc, 88, 8);
NTR_LAYOUT(ntr_comm_state, last_complete_tsc, 96, 8);
NTR_LAYOUT(ntr_comm_state, flags, 104, 4);
NTR_LAYOUT(ntr_comm_state, init_kind, 108, 4);
NTR_LAYOUT(ntr_comm_state, aux, 112, 8);
NTR_LAYOUT(ntr_comm_state, replays, 120, 8);
NTR_LAYOUT(ntr_comm_state, replays_done, 128, 8);
NTR_LAYOUT(ntr_comm_state, late_med_us, 136, 4);
NTR_LAYOUT(ntr_comm_state, late_window, 140, 4);
NTR_LAYOUT(ntr_comm_state, late_last, 144, 4);
NTR_LAYOUT(ntr_comm_state, late_reports, 148, 4);
NTR_LAYOUT(ntr_comm_state, mismatches, 152, 4);
NTR_LAYOUT(ntr_comm_state, stalls, 156, 4);
NTR_LAYOUT(ntr_comm_state, p2p_issued, 160, 8);
NTR_LAYOUT(ntr_comm_state, p2p_completed, 168, 8);
NTR_LAYOUT(ntr_comm_state, bytes_issued, 176, 8);
NTR_LAYOUT(ntr_comm_state, reserved, 184, 8);

/* `struct ntr_stack` */
NTR_LAYOUT(ntr_stack, hash, 0, 8);
NTR_LAYOUT(ntr_stack, depth, 8, 4);
NTR_LAYOUT(ntr_stack, kind, 12, 4);
NTR_LAYOUT(ntr_stack, ip, 16, 256);

/* `struct ntr_dump_preamble` */
NTR_LAYOUT(ntr_dump_preamble, magic, 0, 8);
NTR_LAYOUT(ntr_dump_preamble, version, 8, 4);
NTR_LAYOUT(ntr_dump_preamble, preamble_size, 12, 4);
NTR_LAYOUT(ntr_dump_preamble, payload_size, 16, 8);
NTR_LAYOUT(ntr_dump_preamble, compressed_size, 24, 8);
NTR_LAYOUT(ntr_dump_preamble, checksum, 32, 8);
NTR_LAYOUT(ntr_dump_preamble, section_count, 40, 4);
NTR_LAYOUT(ntr_dump_preamble, flags, 44, 4);
NTR_LAYOUT(ntr_dump_preamble, reserved, 48, 16);

/* `struct ntr_section` */
NTR_LAYOUT(ntr_section, type, 0, 4);
NTR_LAYOUT(ntr_section, reserved, 4, 4);
NTR_LAYOUT(ntr_section, length, 8, 8);

/* `struct ntr_trigger` */
NTR_LAYOUT(ntr_trigger, kind, 0, 4);
NTR_LAYOUT(ntr_trigger, signo, 4, 4);
NTR_LAYOUT(ntr_trigger, exit_code, 8, 4);
NTR_LAYOUT(ntr_trigger, flags, 12, 4);
NTR_LAYOUT(ntr_trigger, tsc, 16, 8);
NTR_LAYOUT(ntr_trigger, lost, 24, 8);
NTR_LAYOUT(ntr_trigger, reason, 32, 96);

/* A translation unit must declare something (ISO C); this is never used. */
extern const int ntr_format_layout_checked;
const int ntr_format_layout_checked = 1;
