// memcpy of n records of vs bytes into a MAP_SHARED mapping of a preallocated file.
// mode 0: no prefault; mode 1: whole mapping write-faulted (zeros) before timing;
// mode 2: a second thread write-faults ahead of the writer (by AHEAD bytes) while it runs;
// mode 3: pwrite appends (growing file) for reference.
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
static char*map; static long len; static _Atomic long wpos; static _Atomic int stop_;
#define AHEAD (8L<<20)
static void*faulter(void*a){ long p=0; while(p<len && !stop_){ long lim=atomic_load(&wpos)+AHEAD; if(p<lim){ map[p]=0; p+=4096;} else { struct timespec t={0,20000}; nanosleep(&t,0);} } return 0;}
int main(int argc,char**argv){
  const char*dir=argv[1]; long n=atol(argv[2]); int vs=atoi(argv[3]); int mode=atoi(argv[4]);
  char path[4096]; snprintf(path,sizeof path,"%s/mapbench.%d",dir,mode);
  unlink(path); int fd=open(path,O_CREAT|O_RDWR|O_TRUNC,0644);
  char*buf=malloc(vs); memset(buf,'x',vs); len=n*(long)vs; len=(len+4095)&~4095L;
  if(mode==3){ double t0=now(); long off=0; for(long i=0;i<n;i++){ if(pwrite(fd,buf,vs,off)!=vs) return 1; off+=vs;} double t1=now();
    printf("mode 3 pwrite append: %.0f ns each\n",(t1-t0)/n); unlink(path); return 0;}
  if(fallocate(fd,0,0,len)){perror("fallocate");return 1;}
  map=mmap(NULL,len,PROT_READ|PROT_WRITE,MAP_SHARED,fd,0); if(map==MAP_FAILED){perror("mmap");return 1;}
  if(mode==1){ for(long p=0;p<len;p+=4096) map[p]=0; }
  pthread_t th; if(mode==2) pthread_create(&th,0,faulter,0);
  if(mode==2){ struct timespec t={0,5000000}; nanosleep(&t,0);}  
  double t0=now(); long off=0;
  for(long i=0;i<n;i++){ memcpy(map+off,buf,vs); off+=vs; atomic_store(&wpos,off);} 
  double t1=now(); stop_=1; if(mode==2) pthread_join(th,0);
  printf("mode %d: %ld x %d B: %.0f ns each\n",mode,n,vs,(t1-t0)/n);
  munmap(map,len); close(fd); unlink(path); return 0;}
