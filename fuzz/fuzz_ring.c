/*
 * fuzz/fuzz_ring.c — ring attachment and consumption on arbitrary header and slot bytes.
 *
 * A consumer trusts nothing in the shared memory: the producer (any process the policy lets
 * create a ring) writes the header and every slot, and may rewrite them at any time. Input:
 *
 *   byte 0          capacity 2^(1 + (b & 7)) records; bits 3-4 bend the mapping's size (exact,
 *                   exact, one slot short, one slot long); bit 5: also attach through a memfd
 *                   (sealed, or unsealed with bit 6), as ring_consumer_attach and
 *                   ring_info_from_fd see it
 *   bytes 1..512    the first 512 bytes of the header page (identity, head at 128, the drop
 *                   count at 256, the first counters at 384); the rest of the page is zero
 *   then            12-byte commands: u8 op, u8 argument, u16 offset, u64 value:
 *                     0 store value into the slots at offset, 1 into the header at offset,
 *                     2 ring_consume up to argument % 33 records, 3 ring_consume_final,
 *                     4 an honest ring_push of value (when the header let a producer attach)
 *
 * The memory has exactly the size the capacity asks for (give or take the bent size), aligned
 * like a mapping, with ASan's redzone right after it, so any read outside the ring is caught.
 * Properties: attach never fails in another way than documented; every consume returns at most
 * what was asked, and a consumer's position moves by exactly what it returned plus what it
 * counted lost; it never moves backwards; the header snapshot stays bounded and terminated; a
 * consume that finds the header corrupted (RING_CORRUPTED) counts and moves nothing, and so does
 * every one after it.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shm/ring.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HEADER_IMAGE 512u
#define HEADER_PAGE 4096u
#define SLOT_BYTES 32u
#define COMMAND_BYTES 12u

struct command {
	uint8_t op;
	uint8_t argument;
	uint16_t offset;
	uint64_t value;
};

static struct command command_at(const uint8_t *bytes)
{
	struct command command;

	command.op = bytes[0];
	command.argument = bytes[1];
	memcpy(&command.offset, bytes + 2, sizeof(command.offset));
	memcpy(&command.value, bytes + 4, sizeof(command.value));
	return command;
}

static bool attach_error_documented(int status)
{
	return status == -EBADMSG || status == -EPROTO || status == -EMSGSIZE ||
	       status == -EINVAL || status == -EPERM;
}

static void check_info(const struct ring_info *info)
{
	assert(info->counter_count <= RING_MAX_COUNTERS);
	for (uint32_t i = 0; i < info->counter_count; i++)
		assert(memchr(info->counters[i].name, '\0', RING_NAME_MAX) != NULL);
}

/* The same bytes behind a descriptor: what ring_consumer_attach and ring_info_from_fd judge. */
static void check_through_fd(const uint8_t *memory, size_t bytes, bool sealed)
{
	struct ring_consumer consumer;
	struct ring_info info;
	int fd = memfd_create("fuzz-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	int status;

	if (fd < 0)
		return;
	if (write(fd, memory, bytes) != (ssize_t)bytes)
		goto out;
	if (sealed && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0)
		goto out;
	status = ring_info_from_fd(fd, &info);
	assert(status == 0 || attach_error_documented(status));
	if (status == 0)
		check_info(&info);
	status = ring_consumer_attach(&consumer, fd);
	assert(status == 0 || attach_error_documented(status));
	assert(status != 0 || sealed);
	if (status == 0) {
		struct ring_record records[8];
		uint64_t lost = 0;
		ssize_t count = ring_consume_final(&consumer, records, 8, &lost);
		assert(count >= 0 || (count == RING_CORRUPTED && lost == 0));
		ring_consumer_detach(&consumer);
	}
out:
	close(fd);
}

struct tally {
	uint64_t start;
	uint64_t returned;
	uint64_t lost;
};

static void consume(struct ring_consumer *consumer, struct tally *tally, size_t max, bool final)
{
	struct ring_record records[32];
	uint64_t before = consumer->position;
	uint64_t lost = 0;
	ssize_t count = final ? ring_consume_final(consumer, records, max, &lost)
			      : ring_consume(consumer, records, max, &lost);

	if (count == RING_CORRUPTED || consumer->corrupted) {
		assert(count == RING_CORRUPTED && lost == 0 && consumer->position == before);
		return;
	}
	assert(count >= 0 && (size_t)count <= max);
	assert(consumer->position >= before);
	tally->returned += (uint64_t)count;
	tally->lost += lost;
	assert(consumer->position - tally->start == tally->returned + tally->lost);
	assert(consumer->lost_total == tally->lost);
}

static void run_commands(uint8_t *memory, size_t bytes, size_t slot_bytes,
			 const uint8_t *data, size_t size)
{
	struct ring_consumer consumer;
	struct ring_producer producer;
	struct ring_info info;
	struct tally tally;
	bool producing;
	int status = ring_consumer_use(&consumer, memory, bytes);

	assert(status == 0 || attach_error_documented(status));
	if (status != 0)
		return;
	producing = ring_producer_use(&producer, memory, bytes) == 0;
	tally = (struct tally){ .start = consumer.position };
	for (size_t at = 0; at + COMMAND_BYTES <= size; at += COMMAND_BYTES) {
		struct command command = command_at(data + at);
		switch (command.op % 5) {
		case 0:
			if (slot_bytes >= sizeof(uint64_t))
				memcpy(memory + HEADER_PAGE + ((command.offset % slot_bytes) & ~(size_t)7),
				       &command.value, sizeof(command.value));
			break;
		case 1:
			memcpy(memory + ((command.offset % HEADER_IMAGE) & ~7u), &command.value,
			       sizeof(command.value));
			break;
		case 2:
			consume(&consumer, &tally, command.argument % 33u, false);
			break;
		case 3:
			consume(&consumer, &tally, command.argument % 33u, true);
			break;
		default:
			if (producing) {
				struct ring_record record = { .value = command.value,
							      .counter_id = command.argument };
				status = ring_push(&producer, &record);
				assert(status == 0 || status == -EAGAIN);
			}
			break;
		}
	}
	consume(&consumer, &tally, 32, true);
	ring_consumer_info(&consumer, &info);
	check_info(&info);
	(void)ring_consumer_backlog(&consumer);
	ring_consumer_detach(&consumer);
	if (producing)
		ring_producer_detach(&producer);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t capacity;
	size_t bytes, slot_bytes;
	uint8_t *memory = NULL;
	unsigned bend;

	if (size < 1)
		return 0;
	capacity = 1u << (1 + (data[0] & 7));
	bend = (data[0] >> 3) & 3;
	slot_bytes = (size_t)capacity * SLOT_BYTES;
	if (bend == 2)
		slot_bytes -= SLOT_BYTES;
	else if (bend == 3)
		slot_bytes += SLOT_BYTES;
	bytes = HEADER_PAGE + slot_bytes;
	if (posix_memalign((void **)&memory, HEADER_PAGE, bytes) != 0)
		return 0;
	memset(memory, 0, bytes);
	memcpy(memory, data + 1, size - 1 < HEADER_IMAGE ? size - 1 : HEADER_IMAGE);
	if (data[0] & 0x20)
		check_through_fd(memory, bytes, (data[0] & 0x40) == 0);
	if (size > 1 + HEADER_IMAGE)
		run_commands(memory, bytes, slot_bytes, data + 1 + HEADER_IMAGE,
			     size - 1 - HEADER_IMAGE);
	else
		run_commands(memory, bytes, slot_bytes, NULL, 0);
	free(memory);
	return 0;
}
