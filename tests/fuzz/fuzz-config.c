/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the configuration loader, on whatever bytes a file
 * might hold. The input goes through a memfd so config_load reads it as
 * it reads any file.
 */
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *devnull;
	struct config *conf;
	char path[64];
	int fd;

	if (devnull == NULL && (devnull = fopen("/dev/null", "w")) == NULL)
		return 0;
	fd = memfd_create("zkelect-config", 0);
	if (fd == -1)
		return 0;
	if (write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	conf = config_load(path, devnull);
	config_free(conf);
	close(fd);
	return 0;
}
