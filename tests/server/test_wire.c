/*
 * proto/wire: every message (the resource-management ones too) survives encode/decode, every decoder refuses a payload one byte too
 * short or too long, the header decoder tells garbage, other versions and oversized frames
 * apart, and every status code has its text and an errno that maps back to it.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "proto/wire.h"
#include "proto/wire_sim.h"

static uint8_t buffer[WIRE_MAX_FRAME];

/* Decode `length` bytes, then check one byte less and one byte more are refused. */
#define CHECK_EXACT(decode, length, out)                                                 \
	do {                                                                             \
		assert_int_equal(decode(buffer, (length), (out)), 0);                   \
		assert_int_equal(decode(buffer, (length) - 1, (out)), -EBADMSG);        \
		assert_int_equal(decode(buffer, (length) + 1, (out)), -EBADMSG);        \
		assert_int_equal(decode(buffer, (length), (out)), 0);                   \
	} while (0)

static void test_header(void **state)
{
	struct wire_header header;
	int length;

	(void)state;
	length = wire_frame_finish(buffer, sizeof(buffer), WIRE_OP_READ, 0, 0, 1234, 8);
	assert_int_equal(length, 24);
	assert_int_equal(wire_header_decode(buffer, 15, WIRE_MAX_FRAME, &header), -EAGAIN);
	assert_int_equal(wire_header_decode(buffer, 16, WIRE_MAX_FRAME, &header), 0);
	assert_int_equal(header.length, 24);
	assert_int_equal(header.op, WIRE_OP_READ);
	assert_int_equal(header.request_id, 1234);
	assert_int_equal(buffer[4], 'H');
	assert_int_equal(buffer[5], 'M');
	assert_int_equal(wire_header_decode(buffer, 16, 20, &header), -EMSGSIZE);
	buffer[6] = 2;
	assert_int_equal(wire_header_decode(buffer, 16, WIRE_MAX_FRAME, &header), -EPROTONOSUPPORT);
	assert_int_equal(header.request_id, 1234);
	buffer[6] = 1;
	buffer[7] = 0x80;
	assert_int_equal(wire_header_decode(buffer, 16, WIRE_MAX_FRAME, &header), -EBADMSG);
	buffer[7] = 0;
	buffer[4] = 'X';
	assert_int_equal(wire_header_decode(buffer, 16, WIRE_MAX_FRAME, &header), -EBADMSG);
	assert_int_equal(wire_frame_finish(buffer, sizeof(buffer), 1, 0, 0, 1, WIRE_MAX_PAYLOAD + 1),
			 -EMSGSIZE);
}

static void test_fixed_messages(void **state)
{
	struct wire_writer writer;
	struct wire_hello_request hello = { 1, 1, 0, "client" }, hello_out;
	struct wire_hello_reply reply = { .version = 1, .max_frame = 5, .features = 1ull << 40,
					  .server_version = "v" },
				reply_out;
	struct wire_write_request write = { 3, 0x611, 0x8000000000000001ull }, write_out;
	struct wire_ring_key key = { 1, 2, 3 }, key_out;
	struct wire_sim_truth truth = { 5, 1.25, 7, 8 }, truth_out;
	struct wire_sim_energy_at_request at_request = { 1, 2, 3 }, at_request_out;
	struct wire_sim_energy_at at = { 5, 2.5, 7, 8, 9 }, at_out;
	const char *trace_text;
	uint32_t trace_length;
	struct wire_ring_entry entry = { 1, 2, 3, 64, 1, -5, 2, 4096, 1000, 77 }, entry_out;

	(void)state;
	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_hello_request(&writer, &hello);
	assert_int_equal(writer.used, WIRE_HELLO_REQUEST_SIZE);
	CHECK_EXACT(wire_get_hello_request, WIRE_HELLO_REQUEST_SIZE, &hello_out);
	assert_string_equal(hello_out.client_name, "client");

	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_hello_reply(&writer, &reply);
	assert_int_equal(writer.used, WIRE_HELLO_REPLY_SIZE);
	CHECK_EXACT(wire_get_hello_reply, WIRE_HELLO_REPLY_SIZE, &reply_out);
	assert_int_equal(reply_out.features, 1ull << 40);

	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_write_request(&writer, &write);
	CHECK_EXACT(wire_get_write_request, WIRE_WRITE_REQUEST_SIZE, &write_out);
	assert_int_equal(write_out.value, write.value);

	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_ring_key(&writer, &key);
	CHECK_EXACT(wire_get_ring_key, WIRE_RING_KEY_SIZE, &key_out);
	assert_int_equal(key_out.instance, 3);

	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_sim_truth(&writer, &truth);
	CHECK_EXACT(wire_get_sim_truth, WIRE_SIM_TRUTH_SIZE, &truth_out);
	assert_true(truth_out.joules == 1.25);

	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_sim_energy_at_request(&writer, &at_request);
	CHECK_EXACT(wire_get_sim_energy_at_request, WIRE_SIM_ENERGY_AT_REQUEST_SIZE,
		    &at_request_out);
	assert_int_equal(at_request_out.at_ns, 3);

	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_sim_energy_at(&writer, &at);
	CHECK_EXACT(wire_get_sim_energy_at, WIRE_SIM_ENERGY_AT_SIZE, &at_out);
	assert_true(at_out.joules == 2.5);
	assert_int_equal(at_out.smi_count, 9);

	/* A power trace: its length must be the payload's rest, and no NUL inside. */
	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_sim_power_trace(&writer, "pkg: 1 2\n", 9);
	assert_int_equal(wire_get_sim_power_trace(buffer, writer.used, &trace_text, &trace_length), 0);
	assert_int_equal(trace_length, 9);
	assert_memory_equal(trace_text, "pkg: 1 2\n", 9);
	assert_int_equal(wire_get_sim_power_trace(buffer, writer.used - 1, &trace_text,
						  &trace_length), -EINVAL);
	assert_int_equal(wire_get_sim_power_trace(buffer, 3, &trace_text, &trace_length), -EINVAL);
	buffer[6] = '\0';
	assert_int_equal(wire_get_sim_power_trace(buffer, writer.used, &trace_text, &trace_length),
			 -EINVAL);

	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_ring_entry(&writer, &entry);
	CHECK_EXACT(wire_get_ring_entry, WIRE_RING_ENTRY_SIZE, &entry_out);
	assert_int_equal(entry_out.producer_pid, -5);
	assert_int_equal(entry_out.bytes, 4096);
	assert_int_equal(entry_out.owner_uid, 1000);
	assert_int_equal(entry_out.owner_pid, 77);
}

static void test_variable_messages(void **state)
{
	static struct wire_machine_info machine, machine_out;
	static struct wire_ring_create ring, ring_out;
	struct wire_writer writer;
	struct wire_batch_op op = { WIRE_BATCH_WRITE, 0, 1, 0x186, 0x43003c }, op_out;
	uint32_t count;
	size_t length;

	(void)state;
	machine.cpu_count = 6;
	machine.cpu_package[5] = 1;
	snprintf(machine.vendor, sizeof(machine.vendor), "GenuineIntel");
	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_machine_info(&writer, &machine);
	length = writer.used;
	assert_int_equal(length, WIRE_MACHINE_INFO_FIXED_SIZE + 12);
	CHECK_EXACT(wire_get_machine_info, length, &machine_out);
	assert_int_equal(machine_out.cpu_count, 6);
	assert_int_equal(machine_out.cpu_package[5], 1);
	assert_string_equal(machine_out.vendor, "GenuineIntel");

	ring.counter_count = 2;
	ring.capacity = 64;
	snprintf(ring.counters[1].name, sizeof(ring.counters[1].name), "PMC0");
	ring.counters[1].unit_exponent = -3;
	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_ring_create(&writer, &ring);
	length = writer.used;
	assert_int_equal(length, WIRE_RING_CREATE_FIXED_SIZE + 2 * WIRE_RING_COUNTER_SIZE);
	CHECK_EXACT(wire_get_ring_create, length, &ring_out);
	assert_string_equal(ring_out.counters[1].name, "PMC0");
	assert_int_equal(ring_out.counters[1].unit_exponent, -3);

	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_batch_header(&writer, 2);
	wire_put_batch_op(&writer, &op);
	wire_put_batch_op(&writer, &op);
	length = writer.used;
	assert_int_equal(wire_get_batch_count(buffer, length, WIRE_BATCH_OP_SIZE, 1024, &count), 0);
	assert_int_equal(count, 2);
	assert_int_equal(wire_get_batch_count(buffer, length - 1, WIRE_BATCH_OP_SIZE, 1024, &count),
			 -EBADMSG);
	assert_int_equal(wire_get_batch_count(buffer, length + 24, WIRE_BATCH_OP_SIZE, 1024, &count),
			 -EBADMSG);
	assert_int_equal(wire_get_batch_count(buffer, 4, WIRE_BATCH_OP_SIZE, 1024, &count),
			 -EBADMSG);
	assert_int_equal(wire_get_batch_count(buffer, length, WIRE_BATCH_OP_SIZE, 1, &count),
			 -EINVAL);
	assert_int_equal(wire_get_batch_op(buffer, 1, &op_out), 0);
	assert_int_equal(op_out.address, 0x186);
	assert_int_equal(op_out.value, 0x43003c);
	buffer[WIRE_BATCH_HEADER_SIZE + 12] = 1; /* the reserved word of op 0 */
	assert_int_equal(wire_get_batch_op(buffer, 0, &op_out), -EINVAL);
}

/* MACHINE_INFO as <haecer/machine_fields.h> lists it: every field comes back as it went, the
 * per-CPU arrays the flags announce follow the fixed part, and the fixed fields keep the byte
 * offsets protocol v1 gave them (a reordered list would move tsc_hz and the RAPL arrays). */
static void test_machine_info_fields(void **state)
{
	static struct wire_machine_info machine, machine_out;
	struct wire_writer writer;
	uint64_t tsc_hz;
	uint32_t max_power;
	size_t length;

	(void)state;
	snprintf(machine.vendor, sizeof(machine.vendor), "AuthenticAMD");
	snprintf(machine.model_name, sizeof(machine.model_name), "a model");
	snprintf(machine.sim_model, sizeof(machine.sim_model), "zen4");
	machine.family = 0x19;
	machine.model = 0x61;
	machine.stepping = 2;
	machine.cpuid_0a[3] = 0xdead;
	machine.cpu_count = 3;
	machine.package_count = 2;
	machine.rapl_domains = 0x5;
	machine.flags = WIRE_MACHINE_HYBRID | WIRE_MACHINE_DIES | WIRE_MACHINE_SIMULATED;
	machine.rapl_power_unit = 0xa1003;
	machine.tsc_hz = 2400000000ull;
	machine.rapl_energy_exponent[7] = 16;
	machine.rapl_max_power_mw[7] = 123456;
	for (uint32_t cpu = 0; cpu < 3; cpu++) {
		machine.cpu_package[cpu] = (uint16_t)(cpu / 2);
		machine.cpu_core_type[cpu] = cpu == 0 ? 0x40 : 0x20;
		machine.cpu_die[cpu] = (uint16_t)(cpu + 7);
	}
	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_machine_info(&writer, &machine);
	length = writer.used;
	assert_int_equal(length, WIRE_MACHINE_INFO_FIXED_SIZE + 3 * (2 + 1 + 2));
	memcpy(&tsc_hz, buffer + 164, sizeof(tsc_hz));
	assert_true(tsc_hz == machine.tsc_hz);
	memcpy(&max_power, buffer + 180 + 7 * 4, sizeof(max_power));
	assert_int_equal(max_power, 123456);
	assert_int_equal(buffer[WIRE_MACHINE_INFO_FIXED_SIZE + 3 * 2 + 0], 0x40); /* core types */
	CHECK_EXACT(wire_get_machine_info, length, &machine_out);
	assert_memory_equal(&machine_out, &machine, sizeof(machine));

	/* Without the flags, only the packages are on the wire, and the rest decodes as 0. */
	machine.flags = 0;
	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_machine_info(&writer, &machine);
	assert_int_equal(writer.used, WIRE_MACHINE_INFO_FIXED_SIZE + 3 * 2);
	CHECK_EXACT(wire_get_machine_info, writer.used, &machine_out);
	assert_int_equal(machine_out.cpu_die[2], 0);
	assert_int_equal(machine_out.cpu_core_type[0], 0);
	assert_int_equal(machine_out.cpu_package[2], 1);
}

/* ENERGY_GRANT: exact lengths, and no setting the flags do not announce. */
static void test_energy_grant_messages(void **state)
{
	struct wire_energy_grant_request request = { 0x611, 0 }, request_out;
	struct wire_energy_grant grant = { 0x611, WIRE_ENERGY_GRANT_COARSE |
					   WIRE_ENERGY_GRANT_POLICY_COARSE, 1000, 2000, 1000000,
					   5000000 }, grant_out;
	struct wire_writer writer;

	(void)state;
	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_energy_grant_request(&writer, &request);
	assert_int_equal(writer.used, WIRE_ENERGY_GRANT_REQUEST_SIZE);
	CHECK_EXACT(wire_get_energy_grant_request, writer.used, &request_out);
	assert_int_equal(request_out.address, 0x611);
	buffer[4] = 1; /* flags: none defined */
	assert_int_equal(wire_get_energy_grant_request(buffer, writer.used, &request_out), -EINVAL);

	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_energy_grant(&writer, &grant);
	assert_int_equal(writer.used, WIRE_ENERGY_GRANT_SIZE);
	CHECK_EXACT(wire_get_energy_grant, writer.used, &grant_out);
	assert_memory_equal(&grant_out, &grant, sizeof(grant));
	buffer[4] = WIRE_ENERGY_GRANT_POLICY_COARSE; /* a coarse interval, but a full grant */
	assert_int_equal(wire_get_energy_grant(buffer, writer.used, &grant_out), -EINVAL);
	buffer[4] = WIRE_ENERGY_GRANT_COARSE; /* a policy setting it does not announce */
	assert_int_equal(wire_get_energy_grant(buffer, writer.used, &grant_out), -EINVAL);
	buffer[4] = 0x7; /* a flag nobody knows */
	assert_int_equal(wire_get_energy_grant(buffer, writer.used, &grant_out), -EINVAL);
}

/* ENERGY_READ: READ's 8 bytes, or 16 with a region's flags; nothing else. */
static void test_energy_read_messages(void **state)
{
	struct wire_energy_read_request plain = { 1, 0x611, 0, 0 };
	struct wire_energy_read_request region = { 1, 0x611, WIRE_ENERGY_READ_REGION, 3500 }, out;
	struct wire_writer writer;

	(void)state;
	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_energy_read_request(&writer, &plain);
	assert_int_equal(writer.used, WIRE_READ_REQUEST_SIZE);
	assert_int_equal(wire_get_energy_read_request(buffer, writer.used, &out), 0);
	assert_memory_equal(&out, &plain, sizeof(out));

	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_energy_read_request(&writer, &region);
	assert_int_equal(writer.used, WIRE_ENERGY_READ_REQUEST_SIZE);
	CHECK_EXACT(wire_get_energy_read_request, writer.used, &out);
	assert_memory_equal(&out, &region, sizeof(out));
	assert_int_equal(wire_get_energy_read_request(buffer, 12, &out), -EBADMSG);
	memset(buffer + 12, 0, 4); /* no windows at all */
	assert_int_equal(wire_get_energy_read_request(buffer, writer.used, &out), -EINVAL);
	buffer[12] = 0xa0;
	buffer[13] = 0x0f; /* 4000 us again */
	buffer[8] = 0x3; /* a flag nobody knows */
	assert_int_equal(wire_get_energy_read_request(buffer, writer.used, &out), -EINVAL);
	buffer[8] = 0; /* 16 bytes that ask nothing */
	assert_int_equal(wire_get_energy_read_request(buffer, writer.used, &out), -EINVAL);
	buffer[8] = WIRE_ENERGY_READ_REGION;
	assert_int_equal(wire_get_energy_read_request(buffer, writer.used, &out), 0);
	assert_int_equal(out.region_edges_us, 4000);
	buffer[15] = 0x40; /* over WIRE_ENERGY_READ_REGION_MAX_US */
	assert_int_equal(wire_get_energy_read_request(buffer, writer.used, &out), -EINVAL);
}

static void test_resource_messages(void **state)
{
	static struct wire_slot_ids ids, ids_out;
	struct wire_writer writer;
	struct wire_slot_alloc alloc = { 3, WIRE_SLOT_PROGRAMMABLE, -1 }, alloc_out;
	struct wire_slot slot = { 7, 3, WIRE_SLOT_FIXED, 2, 48, 0x30B, 0x38D }, slot_out;
	struct wire_slot_program program = { 7, 0x43003C }, program_out;
	struct wire_schedule_start start = { 4, WIRE_SCHEDULE_PERSISTENT, 1000000, 10, 2, 64 },
				   start_out;
	struct wire_schedule_started started = { 9, 12 }, started_out;
	uint64_t values[3] = { 1, 2, 3 }, values_out[3], raw, total;
	uint32_t handle, count;
	size_t length;

	(void)state;
	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_slot_alloc(&writer, &alloc);
	CHECK_EXACT(wire_get_slot_alloc, WIRE_SLOT_ALLOC_SIZE, &alloc_out);
	assert_int_equal(alloc_out.index, -1);
	buffer[6] = 1; /* reserved */
	assert_int_equal(wire_get_slot_alloc(buffer, WIRE_SLOT_ALLOC_SIZE, &alloc_out), -EINVAL);

	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_slot(&writer, &slot);
	CHECK_EXACT(wire_get_slot, WIRE_SLOT_SIZE, &slot_out);
	assert_int_equal(slot_out.width, 48);
	assert_int_equal(slot_out.control_address, 0x38D);

	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_slot_program(&writer, &program);
	CHECK_EXACT(wire_get_slot_program, WIRE_SLOT_PROGRAM_SIZE, &program_out);
	assert_int_equal(program_out.config, 0x43003C);

	ids.action = WIRE_SLOT_RESET;
	ids.count = 3;
	ids.ids[2] = 42;
	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_slot_ids(&writer, &ids);
	length = writer.used;
	assert_int_equal(length, WIRE_SLOT_IDS_HEADER_SIZE + 12);
	CHECK_EXACT(wire_get_slot_ids, length, &ids_out);
	assert_int_equal(ids_out.ids[2], 42);
	assert_int_equal(ids_out.action, WIRE_SLOT_RESET);
	ids.count = 0;
	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_slot_ids(&writer, &ids);
	assert_int_equal(wire_get_slot_ids(buffer, writer.used, &ids_out), -EINVAL);

	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_slot_values(&writer, values, 3);
	assert_int_equal(wire_get_slot_values(buffer, writer.used, values_out, 3), 0);
	assert_int_equal(values_out[2], 3);
	assert_int_equal(wire_get_slot_values(buffer, writer.used, values_out, 2), -EBADMSG);
	assert_int_equal(wire_get_slot_values(buffer, writer.used - 1, values_out, 3), -EBADMSG);

	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_energy_reading(&writer, 5, 1ull << 40 | 5);
	assert_int_equal(wire_get_energy_reading(buffer, WIRE_ENERGY_READ_REPLY_SIZE, &raw, &total),
			 0);
	assert_int_equal(total, 1ull << 40 | 5);
	assert_int_equal(wire_get_energy_reading(buffer, 15, &raw, &total), -EBADMSG);

	struct wire_energy_page_request page_request = { 0x611, 10000, WIRE_ENERGY_PAGE_PRECISE },
					page_request_out;
	struct wire_energy_page page = { 0x611, WIRE_ENERGY_PAGE_COARSE, 2, 1000, 50, 1000000,
					 4096 }, page_out;
	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_energy_page_request(&writer, &page_request);
	assert_int_equal(writer.used, WIRE_ENERGY_PAGE_REQUEST_SIZE);
	assert_int_equal(wire_get_energy_page_request(buffer, writer.used, &page_request_out), 0);
	assert_int_equal(page_request_out.rate_hz, 10000);
	assert_int_equal(page_request_out.flags, WIRE_ENERGY_PAGE_PRECISE);
	/* Version 1's 8-byte request: no flags. */
	assert_int_equal(wire_get_energy_page_request(buffer, 8, &page_request_out), 0);
	assert_int_equal(page_request_out.flags, 0);
	buffer[8] |= 0x80; /* a flag nobody knows */
	assert_int_equal(wire_get_energy_page_request(buffer, writer.used, &page_request_out),
			 -EINVAL);
	buffer[8] &= 0x7f;
	assert_int_equal(wire_get_energy_page_request(buffer, writer.used - 1, &page_request_out),
			 -EBADMSG);
	assert_int_equal(wire_get_energy_page_request(buffer, writer.used + 1, &page_request_out),
			 -EBADMSG);
	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_energy_page(&writer, &page);
	assert_int_equal(writer.used, WIRE_ENERGY_PAGE_REPLY_SIZE);
	assert_int_equal(wire_get_energy_page(buffer, writer.used, &page_out), 0);
	assert_true(page_out.address == page.address && page_out.flags == page.flags &&
		    page_out.entry_count == page.entry_count && page_out.rate_hz == page.rate_hz &&
		    page_out.min_interval_ms == page.min_interval_ms &&
		    page_out.resolution_uj == page.resolution_uj && page_out.bytes == page.bytes);
	assert_int_equal(wire_get_energy_page(buffer, writer.used - 1, &page_out), -EBADMSG);
	assert_int_equal(wire_get_energy_page(buffer, writer.used + 1, &page_out), -EBADMSG);
	buffer[4] = 0x4; /* an unknown flag (1 coarse, 2 precise edges) */
	assert_int_equal(wire_get_energy_page(buffer, writer.used, &page_out), -EINVAL);

	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_batch_run(&writer, 3, 8);
	assert_int_equal(wire_get_batch_run(buffer, WIRE_BATCH_RUN_SIZE, &handle, &count), 0);
	assert_int_equal(count, 8);
	assert_int_equal(wire_get_batch_run(buffer, 7, &handle, &count), -EBADMSG);
	assert_int_equal(wire_get_u32_payload(buffer, 4, &handle), 0);
	assert_int_equal(handle, 3);
	assert_int_equal(wire_get_u32_payload(buffer, 5, &handle), -EBADMSG);

	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_schedule_start(&writer, &start);
	CHECK_EXACT(wire_get_schedule_start, WIRE_SCHEDULE_START_SIZE, &start_out);
	assert_int_equal(start_out.period_ns, 1000000);
	assert_int_equal(start_out.capacity, 64);
	start.flags = 0x2;
	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_schedule_start(&writer, &start);
	assert_int_equal(wire_get_schedule_start(buffer, WIRE_SCHEDULE_START_SIZE, &start_out),
			 -EINVAL);

	wire_writer_init(&writer, buffer, sizeof(buffer));
	wire_put_schedule_started(&writer, &started);
	CHECK_EXACT(wire_get_schedule_started, WIRE_SCHEDULE_STARTED_SIZE, &started_out);
	assert_int_equal(started_out.ring_instance, 12);
	assert_string_equal(wire_op_name(WIRE_OP_SLOT_CONTROL), "SLOT_CONTROL");
}

static void test_status_codes(void **state)
{
	(void)state;
	for (uint16_t status = 0; status < WIRE_STATUS_COUNT; status++) {
		assert_string_not_equal(wire_status_text(status), "unknown status");
		assert_int_equal(wire_status_from_errno(wire_status_to_errno(status)), status);
	}
	assert_string_equal(wire_status_text(WIRE_STATUS_COUNT), "unknown status");
	assert_int_equal(wire_status_to_errno(999), -EPROTO);
	assert_int_equal(wire_status_from_errno(-EXDEV), WIRE_STATUS_INTERNAL);
	/* The numbers are the protocol. */
	assert_int_equal(WIRE_STATUS_DENIED, 1);
	assert_int_equal(wire_status_to_errno(WIRE_STATUS_MASK), -EACCES);
	assert_int_equal(WIRE_STATUS_INTERNAL, 19);
	assert_string_equal(wire_op_name(WIRE_OP_BATCH), "BATCH");
	assert_string_equal(wire_op_name(0x7777), "UNKNOWN");
}

/* proto/wire_ops.h is the one table of ops: each has its code, its name and whether it may
 * write, which msrd's exclusive-writer lock follows (issue 30, item 4). */
static void test_op_table(void **state)
{
#define CHECK_OP(name, code, writes)                                              \
	assert_int_equal(WIRE_OP_##name, code);                                   \
	assert_string_equal(wire_op_name(code), #name);                           \
	assert_int_equal(wire_op_writes(code), WIRE_WRITES_##writes);
	WIRE_OPS(CHECK_OP)
#undef CHECK_OP
	(void)state;
	assert_int_equal(wire_op_writes(WIRE_OP_WRITE), WIRE_WRITES_ALWAYS);
	assert_int_equal(wire_op_writes(WIRE_OP_SLOT_PROGRAM), WIRE_WRITES_ALWAYS);
	assert_int_equal(wire_op_writes(WIRE_OP_BATCH), WIRE_WRITES_BY_PAYLOAD);
	assert_int_equal(wire_op_writes(WIRE_OP_BATCH_RUN), WIRE_WRITES_BY_PAYLOAD);
	assert_int_equal(wire_op_writes(WIRE_OP_READ), WIRE_WRITES_NEVER);
	assert_int_equal(wire_op_writes(0x7777), WIRE_WRITES_NEVER);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_header),
		cmocka_unit_test(test_fixed_messages),
		cmocka_unit_test(test_variable_messages),
		cmocka_unit_test(test_machine_info_fields),
		cmocka_unit_test(test_energy_grant_messages),
		cmocka_unit_test(test_energy_read_messages),
		cmocka_unit_test(test_resource_messages),
		cmocka_unit_test(test_status_codes),
		cmocka_unit_test(test_op_table),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
