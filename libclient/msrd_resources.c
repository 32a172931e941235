/*
 * libclient/msrd_resources.c — the resource-management requests of <haecer/msrd.h>: counter
 * slots, 64-bit energy totals, registered batches and schedules.
 */
#include "libclient/msrd_conn.h"

#include <errno.h>

int haecer_slot_alloc(struct haecer_conn *conn, uint32_t cpu, uint16_t kind, int index,
		      struct haecer_slot *out)
{
	(void)conn, (void)cpu, (void)kind, (void)index, (void)out;
	return -EOPNOTSUPP;
}

int haecer_slot_program(struct haecer_conn *conn, uint32_t slot_id, uint64_t config)
{
	(void)conn, (void)slot_id, (void)config;
	return -EOPNOTSUPP;
}

int haecer_slot_control(struct haecer_conn *conn, const uint32_t *slot_ids, size_t count,
			uint16_t action)
{
	(void)conn, (void)slot_ids, (void)count, (void)action;
	return -EOPNOTSUPP;
}

int haecer_slot_read(struct haecer_conn *conn, const uint32_t *slot_ids, size_t count,
		     uint64_t *values, bool synchronized)
{
	(void)conn, (void)slot_ids, (void)count, (void)values, (void)synchronized;
	return -EOPNOTSUPP;
}

int haecer_slot_free(struct haecer_conn *conn, uint32_t slot_id)
{
	(void)conn, (void)slot_id;
	return -EOPNOTSUPP;
}

int haecer_energy_read(struct haecer_conn *conn, uint32_t cpu, uint32_t address, uint64_t *raw,
		       uint64_t *total)
{
	(void)conn, (void)cpu, (void)address, (void)raw, (void)total;
	return -EOPNOTSUPP;
}

int haecer_batch_register(struct haecer_conn *conn, const struct haecer_msr_op *ops, size_t count,
			  uint32_t *handle)
{
	(void)conn, (void)ops, (void)count, (void)handle;
	return -EOPNOTSUPP;
}

int haecer_batch_run(struct haecer_conn *conn, uint32_t handle, struct haecer_msr_op *ops,
		     size_t count)
{
	(void)conn, (void)handle, (void)ops, (void)count;
	return -EOPNOTSUPP;
}

int haecer_batch_release(struct haecer_conn *conn, uint32_t handle)
{
	(void)conn, (void)handle;
	return -EOPNOTSUPP;
}

int haecer_schedule_start(struct haecer_conn *conn, const struct haecer_schedule_spec *spec,
			  uint32_t *schedule_id, uint32_t *ring_instance)
{
	(void)conn, (void)spec, (void)schedule_id, (void)ring_instance;
	return -EOPNOTSUPP;
}

int haecer_schedule_stop(struct haecer_conn *conn, uint32_t schedule_id)
{
	(void)conn, (void)schedule_id;
	return -EOPNOTSUPP;
}
