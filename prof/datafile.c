/*
 * prof/datafile.c — the data file: "HAECPRF1", then records of (type, size, payload). Every
 * size read back is checked against what is left of the file.
 */
#include "prof/prof.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int prof_writer_open(struct prof_writer *writer, const char *path)
{
	writer->error = 0;
	writer->file = fopen(path, "wb");
	if (!writer->file)
		return -errno;
	if (fwrite(PROF_FILE_MAGIC, 1, 8, writer->file) != 8)
		writer->error = -EIO;
	return writer->error;
}

void prof_write(struct prof_writer *writer, uint32_t type, const void *a, size_t a_size,
		const void *b, size_t b_size)
{
	struct prof_record_head head = { .type = type, .size = (uint32_t)(a_size + b_size) };

	/* Payloads start 8-aligned, so a reader may use them in place. */
	if (writer->error)
		return;
	static const unsigned char zeros[8];
	size_t padding = (8 - (a_size + b_size) % 8) % 8;

	if (fwrite(&head, sizeof(head), 1, writer->file) != 1 ||
	    (a_size && fwrite(a, a_size, 1, writer->file) != 1) ||
	    (b_size && fwrite(b, b_size, 1, writer->file) != 1) ||
	    (padding && fwrite(zeros, padding, 1, writer->file) != 1))
		writer->error = -EIO;
}

int prof_writer_close(struct prof_writer *writer)
{
	int error = writer->error;

	if (!writer->file)
		return error;
	if (fclose(writer->file) != 0 && !error)
		error = -errno;
	writer->file = NULL;
	return error;
}

int prof_data_load(const char *path, struct prof_data *data)
{
	FILE *file = fopen(path, "rb");
	size_t capacity = 1 << 20, meta_size = 0, offset = 8;
	const void *payload;
	uint32_t type, size;
	int error = 0, more;

	memset(data, 0, sizeof(*data));
	if (!file)
		return -errno;
	data->bytes = malloc(capacity);
	if (!data->bytes) {
		error = -ENOMEM;
		goto out;
	}
	for (;;) {
		size_t got = fread(data->bytes + data->size, 1, capacity - data->size, file);
		data->size += got;
		if (data->size < capacity)
			break;
		unsigned char *bigger = realloc(data->bytes, capacity * 2);
		if (!bigger) {
			error = -ENOMEM;
			goto out;
		}
		data->bytes = bigger;
		capacity *= 2;
	}
	if (ferror(file)) {
		error = -EIO;
		goto out;
	}
	if (data->size < 8 || memcmp(data->bytes, PROF_FILE_MAGIC, 8) != 0) {
		error = -EBADMSG;
		goto out;
	}
	data->meta = calloc(1, 1);
	if (!data->meta) {
		error = -ENOMEM;
		goto out;
	}
	while ((more = prof_data_next(data, &offset, &type, &payload, &size)) > 0) {
		if (type != PROF_REC_META)
			continue;
		char *grown = realloc(data->meta, meta_size + size + 1);
		if (!grown) {
			error = -ENOMEM;
			goto out;
		}
		data->meta = grown;
		memcpy(data->meta + meta_size, payload, size);
		meta_size += size;
		data->meta[meta_size] = '\0';
	}
	error = more;
out:
	fclose(file);
	if (error < 0)
		prof_data_free(data);
	return error;
}

void prof_data_free(struct prof_data *data)
{
	free(data->bytes);
	free(data->meta);
	memset(data, 0, sizeof(*data));
}

int prof_data_next(const struct prof_data *data, size_t *offset, uint32_t *type,
		   const void **payload, uint32_t *size)
{
	struct prof_record_head head;

	if (*offset == data->size)
		return 0;
	if (data->size - *offset < sizeof(head))
		return -EBADMSG;
	memcpy(&head, data->bytes + *offset, sizeof(head));
	size_t padded = ((size_t)head.size + 7) & ~(size_t)7;
	if (padded > data->size - *offset - sizeof(head))
		return -EBADMSG;
	*type = head.type;
	*size = head.size;
	*payload = data->bytes + *offset + sizeof(head);
	*offset += sizeof(head) + padded;
	return 1;
}

char *prof_meta_get(const struct prof_data *data, const char *key)
{
	size_t key_length = strlen(key);
	const char *line = data->meta;

	while (line && *line) {
		const char *end = strchr(line, '\n');
		size_t length = end ? (size_t)(end - line) : strlen(line);
		if (length > key_length && strncmp(line, key, key_length) == 0 &&
		    line[key_length] == '=')
			return strndup(line + key_length + 1, length - key_length - 1);
		line = end ? end + 1 : NULL;
	}
	return NULL;
}
