// Windowed mapping: every W bytes, fallocate(0) the next window (size grows), mmap it, and
// optionally MADV_POPULATE_WRITE it; memcpy records. mode 0: no populate; 1: populate.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
int main(int argc,char**argv){
  const char*dir=argv[1]; long n=atol(argv[2]); int vs=atoi(argv[3]); int mode=atoi(argv[4]); long W=atol(argv[5])<<20;
  char path[4096]; snprintf(path,sizeof path,"%s/mapbench2.%d",dir,mode);
  unlink(path); int fd=open(path,O_CREAT|O_RDWR|O_TRUNC,0644);
  char*buf=malloc(vs); memset(buf,'x',vs);
  char*map=0; long ws=0,we=0; long off=0; double tpop=0;
  double t0=now();
  for(long i=0;i<n;i++){
    if(off+vs>we){ if(map) munmap(map,we-ws); ws=off&~4095L; we=ws+W; if(we<off+vs) we=off+vs+W;
      if(fallocate(fd,0,ws,we-ws)){perror("fallocate");return 1;}
      map=mmap(0,we-ws,PROT_READ|PROT_WRITE,MAP_SHARED,fd,ws); if(map==MAP_FAILED){perror("mmap");return 1;}
      if(mode==1){ double a=now(); if(madvise(map,we-ws,MADV_POPULATE_WRITE)) perror("madvise"); tpop+=now()-a; } }
    memcpy(map+(off-ws),buf,vs); off+=vs; }
  double t1=now();
  printf("mode %d W=%ld MiB: %.0f ns each (populate %.0f ns of it)\n",mode,W>>20,(t1-t0)/n,tpop/n);
  ftruncate(fd,off); close(fd); unlink(path); return 0;}
